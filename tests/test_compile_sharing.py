"""Issue 13's off mode: every test (executor x input set) compiles its own program; findings do not change.

`make bench` compares this mode with the default one (programs shared across executors and input sets).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from bench.run import MODES
from fuzzer.check import Checker
from fuzzer.ir import input_values
from fuzzer.isolation import ExecutorPool
from fuzzer.outcome import compile_seconds, compiles
from generators.graphs import generate_case

pytest.importorskip("tvm")
pytest.importorskip("torch_xla")

EXECUTORS = ["tvm/default", "xla/native"]


def small_case():
    """The first generated case of seed 1 with several input sets and nothing but tensors (no value-specialized
    recompiles in torch_xla)."""
    for index in range(40):
        case = generate_case(1, index)
        if len(case.input_sets) >= 3 and all(i.kind == "tensor" and i.shape for i in case.graph.inputs):
            sets = [input_values(case, k) for k in range(len(case.input_sets))]
            if len({tuple(np.asarray(s[i.name]).tobytes() for i in case.graph.inputs) for s in sets}) == len(sets):
                return case  # (bfloat16 offset values of two seeds can round to the same tensor)
    pytest.skip("no small all-tensor case in the first 40")


@pytest.fixture(scope="module")
def case():
    return small_case()


@pytest.fixture(scope="module")
def results(case):
    out = {}
    for mode in ("off", "on"):
        with ExecutorPool(EXECUTORS + ["torch/eager"], extra_env=MODES[mode]) as pool:
            out[mode] = Checker(pool).check(case)
    return out


@pytest.mark.slow
def test_off_mode_compiles_every_test_on_its_own(case, results) -> None:
    for name in EXECUTORS:
        outs = results["off"].outcomes[name]
        assert len(outs) == len(case.input_sets) >= 3
        assert all(o.ok for o in outs), [o.summary() for o in outs]
        assert [compiles(o, k) for k, o in enumerate(outs)] == [1] * len(outs), name
        assert all(compile_seconds(o, k) > 0 for k, o in enumerate(outs)), name


@pytest.mark.slow
def test_on_mode_compiles_once_per_case(results) -> None:
    for name in EXECUTORS:
        outs = results["on"].outcomes[name]
        assert sum(compiles(o, k) for k, o in enumerate(outs)) == 1, name
        assert all(compile_seconds(o, k) == 0 for k, o in enumerate(outs) if k), name


@pytest.mark.slow
def test_off_and_on_give_the_same_outcomes_and_findings(results) -> None:
    off, on = results["off"], results["on"]
    assert sorted(f.signature for f in off.findings) == sorted(f.signature for f in on.findings)
    for name in EXECUTORS:
        for a, b in zip(off.outcomes[name], on.outcomes[name]):
            assert (a.status, a.dtypes) == (b.status, b.dtypes)
            assert all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a.outputs, b.outputs))


def test_input_sets_differ(case) -> None:
    """The value variants are real tests: no two input sets of the case are the same values."""
    sets = [input_values(case, k) for k in range(len(case.input_sets))]
    keys = [tuple(np.asarray(s[i.name]).tobytes() for i in case.graph.inputs) for s in sets]
    assert len(set(keys)) == len(keys)


def test_oracle_backend_work_is_counted_not_hidden_in_the_overhead() -> None:
    """A probe (the case graph with every node as an output, compiled again to pin a numeric finding on one
    node) is a backend compile the oracles caused: CheckResult.oracle_backend and the runs rows count it, so
    compiles per test and the overhead of `make bench` include it (regression: probes were uncounted)."""
    from fuzzer.campaign.runner import Campaign
    from tests.test_minimizer import layer_norm_plus_an_unrelated_branch

    case = layer_norm_plus_an_unrelated_branch()
    with ExecutorPool(["tvm/decompose", "torch/eager"]) as pool:
        result = Checker(pool).check(case, ["tvm/decompose"])
    assert any(f.oracle == "error-bound" for f in result.findings)
    spent = result.oracle_backend["tvm/decompose"]
    assert spent["compiles"] >= 1 and spent["compile_s"] > 0  # the probe of the two-output graph
    clock = SimpleNamespace(elapsed=lambda: 0.0)  # the row builder reads only the result and the campaign's clock
    rows = Campaign._rows(clock, result, "0")
    assert sum(r["oracle_compiles"] for r in rows) == sum(int(t["compiles"]) for t in result.oracle_backend.values())


# module-scoped fixtures (worker pools, a cluster) are built once: every test of this file on one xdist worker
pytestmark = pytest.mark.xdist_group(name="test_compile_sharing")


def test_regression_this_files_tests_run_on_one_xdist_worker(request: pytest.FixtureRequest) -> None:
    """Self-found: with pytest 9.2 and pytest-xdist 3.8.0, the xdist_group marks were silently ignored (xdist writes
    the group into `_nodeid`, which pytest 9.2 no longer reads), so this file's module fixture (two campaigns' worth
    of compiles) was built on both workers. Under `--dist loadgroup` every test of the file carries its group."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run under pytest-xdist --dist loadgroup")
    assert request.node.nodeid.endswith("@test_compile_sharing"), request.node.nodeid
