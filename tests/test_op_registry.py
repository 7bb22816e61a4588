"""One op, one record: every op's record is complete, and no layer imports upward (issue 12)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from op_examples import example

from fuzzer.ir import infer
from fuzzer.ops import OPS, TAGS
from fuzzer.ops.base import Example

ROOT = Path(__file__).resolve().parent.parent
REQUIRED = ("infer", "reference", "torch", "relax", "interval", "example")


def missing_fields(spec) -> list[str]:
    """Fields of an op record that are absent or of the wrong kind."""
    out = [f for f in REQUIRED if getattr(spec, f, None) is None]
    if not isinstance(spec.example, Example):
        out.append("example")
    out += [f"tag {t!r}" for t in spec.tags if t not in TAGS]
    out += [f"attr_types[{a!r}]" for a in spec.attrs if a not in spec.attr_types]
    return sorted(set(out))


def test_every_op_record_is_complete() -> None:
    incomplete = {name: missing_fields(spec) for name, spec in OPS.items() if missing_fields(spec)}
    assert not incomplete, f"incomplete op records (op: missing fields): {incomplete}"


# ops whose float64 numpy form would be a program of its own: TVM scripts paste precfuzz's reference interpreter
# instead (never the module built in float64: TVM's own run is no independent answer, issue 33)
NO_NUMPY_FORM = {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
                 "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
                 "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "interpolate_nearest",
                 "interpolate_linear", "scaled_dot_product_attention", "sgd_step", "adam_step",
                 "amp_unscale", "amp_found_inf", "amp_update_scale"}  # and optimizer steps, loss scaling


def test_every_op_but_windows_resampling_attention_and_optimizer_steps_has_a_numpy_form_for_repro_scripts() -> None:
    """TVM repro scripts take the exact answer from numpy; windowed ops from the pasted reference interpreter."""
    assert {n for n, s in OPS.items() if s.numpy is None} == NO_NUMPY_FORM


@pytest.mark.parametrize("op", sorted(n for n, s in OPS.items() if s.numpy is not None))
def test_numpy_forms_match_the_fp64_reference(op: str) -> None:
    import numpy as np

    from fuzzer.interpret import evaluate
    from fuzzer.ir import input_values
    from fuzzer.repro import render_numpy

    case = example(op, "float32")
    namespace: dict = {"np": np, "math": __import__("math")}
    exec(render_numpy(case.graph), namespace)  # noqa: S102 - our own render
    values = input_values(case, 0)
    got = namespace["exact"](*[values[i.name] for i in case.graph.inputs])[0]
    want = evaluate(case.graph, values, rounded=False)["out"]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op", sorted(NO_NUMPY_FORM))
def test_interpreted_forms_run_alone_and_are_the_fp64_reference(op: str) -> None:
    """The exact answer a TVM script pastes for an op without a numpy form runs with numpy, math and ml_dtypes alone
    (masks kept bool, the rest float64 as the script hands them) and is the reference precfuzz judges with."""
    import math

    import ml_dtypes
    import numpy as np

    from fuzzer.interpret import evaluate
    from fuzzer.ir import input_values
    from fuzzer.repro import render_interpreted

    case = example(op, "float32")
    namespace: dict = {"np": np, "math": math, "ml_dtypes": ml_dtypes}
    exec(render_interpreted(case.graph), namespace)  # noqa: S102 - our own render
    values = input_values(case, 0)
    args = [v if np.asarray(v).dtype == bool else np.asarray(v, dtype=np.float64)
            for v in (values[i.name] for i in case.graph.inputs)]
    got = namespace["exact"](*args)
    want = evaluate(case.graph, values, rounded=False)
    for name, g in zip(case.graph.outputs, got):
        np.testing.assert_array_equal(g, want[name])


@pytest.mark.parametrize("op", sorted(OPS))
def test_regression_pasted_reference_functions_run_alone(op: str) -> None:
    """Triage: full repro scripts of model hazards died with NameError (SEQUENTIAL_LIMIT, ValueInfo): the pasted
    reference must define every constant and helper it reads, in both the exact and the ideal modes."""
    import numpy as np

    from fuzzer.dtypes import round_to
    from fuzzer.interpret import (
        PRELUDE,
        evaluate,
        reference_functions,
        render_reference,
    )
    from fuzzer.ir import input_values

    case = example(op, "float32")
    namespace: dict = {}
    exec(compile("from __future__ import annotations\n" + PRELUDE + reference_functions(case.graph)  # noqa: S102
                 + render_reference(case.graph), "<repro>", "exec"), namespace)
    values = input_values(case, 0)
    got = namespace["reference"](values, False, round_to)["out"]
    np.testing.assert_allclose(got, evaluate(case.graph, values, rounded=False)["out"], rtol=1e-12, atol=1e-12)
    f32 = {k: (v.astype(np.float32) if isinstance(v, np.ndarray) and v.dtype == np.float64 else v)
           for k, v in values.items()}
    namespace["reference"](f32, True, lambda v, d: np.asarray(round_to(v, d)).astype(np.float32))


def test_the_registry_check_names_the_op_and_the_field() -> None:
    from dataclasses import replace

    broken = replace(OPS["tanh"], interval=None, tags=frozenset({"no-such-tag"}))
    assert missing_fields(broken) == ["interval", "tag 'no-such-tag'"]


@pytest.mark.parametrize("op", sorted(OPS))
def test_each_example_type_checks_and_renders_for_every_backend(op: str) -> None:
    from fuzzer.executors.torch_render import render_function
    from fuzzer.executors.tvm_render import render_module
    from fuzzer.interpret import render_reference

    for dtype in ("float32", "float16"):
        graph = example(op, dtype).graph
        infer(graph)
        assert "def graph(" in render_function(graph) and "bb.emit" in render_module(graph)
        assert "def reference(" in render_reference(graph)


def test_no_per_op_dispatch_outside_the_op_records() -> None:
    """No `op == "..."` / `op in (...)` chains on op names outside fuzzer/ops/ (generators choose ops, never dispatch)."""
    names = "|".join(re.escape(n) for n in OPS)
    chain = re.compile(rf"""\.op\s*(==|!=|in|not in)\s*[\(\[{{]?\s*["']({names})["']|\bop\s*==\s*["']({names})["']""")
    offenders = []
    for path in (ROOT / "fuzzer").rglob("*.py"):
        if "ops" in path.relative_to(ROOT / "fuzzer").parts[:1]:
            continue
        for k, line in enumerate(path.read_text().splitlines(), 1):
            if chain.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{k}: {line.strip()}")
    assert offenders == [], "\n".join(offenders)


# modules that must not be loaded by importing a lower layer (module -> forbidden prefixes)
LAYERS = {
    "fuzzer.ir": ("torch", "torch_xla", "tvm", "fuzzer.executors", "oracles", "fuzzer.check"),
    "fuzzer.interpret": ("torch", "torch_xla", "tvm", "fuzzer.executors", "oracles"),
    "fuzzer.ops": ("torch", "torch_xla", "tvm", "fuzzer.executors", "fuzzer.interpret", "oracles"),
    "fuzzer.analysis": ("torch", "tvm", "fuzzer.executors", "oracles"),
    "oracles.semantics": ("torch", "torch_xla", "tvm", "fuzzer.executors", "fuzzer.check", "fuzzer.campaign"),
    "oracles.bugs": ("torch", "tvm", "fuzzer.executors", "fuzzer.check"),
    "oracles.error_bounds": ("torch", "tvm", "fuzzer.executors", "fuzzer.check"),
    "fuzzer.executors": ("torch", "torch_xla", "tvm", "fuzzer.check", "fuzzer.campaign"),
    "generators.graphs": ("torch", "torch_xla", "tvm", "fuzzer.executors", "oracles"),
}


@pytest.mark.parametrize("module", sorted(LAYERS))
def test_layers_import_downward_only(module: str) -> None:
    forbidden = LAYERS[module]
    code = (f"import importlib, json, sys\nimportlib.import_module({module!r})\n"
            f"print(json.dumps(sorted(m for m in sys.modules if any(m == f or m.startswith(f + '.') for f in {forbidden!r}))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [], f"importing {module} loads a higher layer"


def test_every_aten_overload_a_record_names_exists_in_this_torch() -> None:
    """The ATen mapping lives on the op records (issue 22): a misspelt or vanished overload name is a test failure,
    not a silently untranslatable op."""
    from fuzzer.audit.translate import PASSTHROUGH, _resolve

    missing = [f"{op}: {name}" for op, spec in OPS.items() for name in spec.aten if _resolve(name) is None]
    missing += [name for name in PASSTHROUGH if _resolve(name) is None]
    assert missing == []


def test_an_overload_becomes_one_op_only() -> None:
    owners: dict[str, list[str]] = {}
    for op, spec in OPS.items():
        for name in spec.aten:
            owners.setdefault(name, []).append(op)
    assert {k: v for k, v in owners.items() if len(v) > 1} == {}


def test_no_import_cycle_among_precfuzz_modules() -> None:
    """Issue 21: fuzzer.identifiers and fuzzer.interpret imported each other. Imports of fuzzer, oracles and
    generators, at module level or deferred inside a function, form no cycle (a package importing its own
    submodules is no cycle). Issue 34: fuzzer.repro and fuzzer.grad_repro, fuzzer.audit.blocks and translate
    imported each other inside functions."""
    import ast

    mods: dict[str, Path] = {}
    for pkg in ("fuzzer", "oracles", "generators"):
        for path in (ROOT / pkg).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            mods[name.removesuffix(".__init__")] = path
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                source = ".".join(base + ([node.module] if node.module else []))
                subs = [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in mods]
                targets = subs if subs and len(subs) == len(node.names) else [source, *subs]
            else:
                continue
            edges[mod] |= {t for t in targets if t in mods and t != mod}
    seen: dict[str, int] = {}  # 1: on the current path, 2: done

    def cycle_from(mod: str, path: list[str]) -> list[str] | None:
        seen[mod] = 1
        for nxt in sorted(edges[mod]):
            if seen.get(nxt) == 1:
                return path + [mod, nxt]
            if nxt not in seen and (found := cycle_from(nxt, path + [mod])):
                return found
        seen[mod] = 2
        return None

    cycles = [c for m in sorted(mods) if m not in seen and (c := cycle_from(m, []))]
    assert cycles == []


def test_regression_a_one_dimensional_attention_mask_is_refused_as_pytorch_refuses_it() -> None:
    """triage32 b288655e41: the minimizer shrank a mask to shape [1680], which torch_xla broadcasts and PyTorch's CPU
    SDPA rejects in every dtype (IndexError): the short repro's float64 reference crashed (exit 2). The IR types an
    op as PyTorch does, so a 1-D mask is no case; [1, S] is."""
    from fuzzer.ir import Graph, Input, IRError, Node, infer

    def graph(mask_shape: tuple[int, ...]) -> Graph:
        return Graph((Input("q", (1, 2, 3, 8), "float32"), Input("k", (1, 2, 4, 8), "float32"),
                      Input("m", mask_shape, "bool")),
                     (Node("a", "scaled_dot_product_attention", ("q", "k", "k", "m")),), ("a",))

    with pytest.raises(IRError, match="rank >= 2"):
        infer(graph((4,)))
    assert infer(graph((1, 4))).values["a"].shape == (1, 2, 3, 8)
