"""The audit at real size, by blocks (issue 37): partition along module paths, blocks fed the activations the whole
model's eager run gives them, blocks of one structure audited once, one table of blocks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from fuzzer.audit.blocks import Block, block_case, boundary, distinct, module_path, partition, structure
from fuzzer.audit.translate import Source
from fuzzer.ir import Graph, Input, Node, infer, load_case
from fuzzer.values import inline

ROOT = Path(__file__).resolve().parent.parent

STACK = '''
import torch
import torch.nn as nn


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        return x + self.lin(self.norm(x))


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 8)
        self.layers = nn.ModuleList([Layer(), Layer(), Layer()])
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h)
        return self.head(torch.relu(h))


def make():
    torch.manual_seed(0)
    return Stack().eval(), (torch.randn(3, 4),)
'''


def _src(module: str) -> Source:
    return Source("m.py", 1, "", f"{module} (Linear)" if module else "")


def _graph() -> tuple[Graph, dict[str, Source]]:
    """x -> a.0 (linear) -> a.1 (linear) -> relu (root glue) -> head (linear)."""
    inputs = (Input("x", (2, 4), "float32"), *(Input(f"w{k}", (4, 4), "float32", "param") for k in range(2)),
              Input("w2", (3, 4), "float32", "param"))
    nodes = (Node("l0", "linear", ("x", "w0")), Node("l1", "linear", ("l0", "w1")), Node("r", "relu", ("l1",)),
             Node("h", "linear", ("r", "w2")))
    sources = {"l0": _src("a.0"), "l1": _src("a.1"), "r": _src(""), "h": _src("head")}
    return Graph(inputs, nodes, ("h",)), sources


def test_module_path_reads_the_deepest_submodule() -> None:
    assert module_path(_src("layers.3.self_attn")) == ("layers", "3", "self_attn")
    assert module_path(_src("")) == () and module_path(None) == ()


def test_partition_splits_a_module_too_big_into_its_submodules_and_glue() -> None:
    graph, sources = _graph()
    assert [b.name for b in partition(graph, sources, limit=10**6)] == ["model"]  # fits: one block
    blocks = partition(graph, sources, limit=20)  # each weight holds 12 or 16 values
    assert [(b.name, b.nodes) for b in blocks] == [("a.0", ("l0",)), ("a.1", ("l1",)), ("model glue", ("r",)),
                                                   ("head", ("h",))]
    assert boundary(graph, blocks) == {"l0", "l1", "r"}


def test_a_block_case_is_fed_its_recorded_activations_and_blocks_of_one_structure_are_audited_once() -> None:
    graph, sources = _graph()
    blocks = partition(graph, sources, limit=20)
    recorded = {"l0": np.full((2, 4), 0.5), "l1": np.full((2, 4), -2.0), "r": np.zeros((2, 4))}
    cases = [block_case(graph, b, recorded, sources, {"model": "m"}) for b in blocks]
    a1 = cases[1].case.graph
    assert [i.name for i in a1.inputs] == ["l0", "w1"] and a1.outputs == ("l1",) and cases[1].fed == ("l0",)
    assert a1.input("l0").role == "param"  # model.to(bfloat16) casts it: the block before made it in bfloat16
    assert inline(a1.input("l0").init).tolist() == recorded["l0"].tolist()  # packed: base64 of float64
    infer(a1)
    assert structure(cases[0].case) != structure(cases[1].case) != structure(cases[3].case)  # x is the user's input
    same = [block_case(graph, Block("a.1", ("l1",)), recorded, sources, {}),
            block_case(graph, Block("again", ("l1",)), {**recorded, "l0": np.ones((2, 4))}, sources, {})]
    (kept,) = distinct(same)  # values differ, structure does not: the one fed the largest activations stands
    assert kept.block.members == ("again", "a.1") and kept.case.meta["members"] == ["again", "a.1"]
    assert inline(kept.case.graph.input("l0").init)[0][0] == 1.0


def test_audit_by_blocks_end_to_end_on_a_small_stack(tmp_path: Path) -> None:
    """--block-values forces the audit by blocks on a small model: its three layers are one structure, audited
    once; the JSON names every block and what it stands for; the verdict is clean on eager."""
    model = tmp_path / "stack.py"
    model.write_text(STACK)
    done = subprocess.run([sys.executable, "-m", "fuzzer.cli", "audit", str(model), "--block-values", "100",
                           "--executors", "torch/eager", "--json", "--out", str(tmp_path / "out"),
                           "--save-case", str(tmp_path / "stack.json")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    verdict = json.loads(done.stdout)
    assert verdict["by_blocks"] and verdict["exit_status"] == 0
    names = {b["name"]: b["members"] for b in verdict["blocks"]}
    (layer,) = [n for n in names if n.startswith("layers.")]
    assert sorted(names[layer]) == ["layers.0", "layers.1", "layers.2"] and names[layer][0] == layer, names
    assert {"embed", "head"} <= set(names) and verdict["graph"]["parameters"] == 16
    assert all(b["table"] for b in verdict["blocks"])
    assert "block 2/" in done.stderr  # a progress line per block
    saved = sorted(tmp_path.glob("stack.block*.json"))  # --save-case by blocks: a case per distinct block
    assert len(saved) == len(names) and not (tmp_path / "stack.json").exists(), saved
    assert {load_case(p).meta["block"] for p in saved} == set(names)
    fed = [load_case(p) for p in saved if load_case(p).meta["block"] == layer][0]  # issue 37: the activations under
    assert len(fed.input_sets) == 2 and fed.input_sets[1], fed.input_sets  # autocast, a second input set
    assert all(not np.array_equal(inline(spec), inline(fed.graph.input(name).init))
               for name, spec in fed.input_sets[1].items())
    assert fed.meta["fed_sets"][1] == "the run under torch.autocast(bfloat16)"


def test_regression_a_model_eager_raises_on_is_audited_by_blocks_when_a_dtype_break_explains_it(tmp_path: Path) -> None:
    """issue 37: the DDPM step around the default UNet (eager raises: the float32 schedule promotes the bf16 UNet's
    input) was refused by blocks ("no dtype break explains it") although the by-blocks graph declares the break; the
    small path reported it as a raise hazard. Both now do: the block holding the break raises under eager."""
    model = tmp_path / "stack.py"
    model.write_text(STACK.replace("return Stack().eval(), (torch.randn(3, 4),)",
                                   "m = Stack().eval()\n    m.layers.to(torch.bfloat16)\n    return m, (torch.randn(3, 4),)"))
    done = subprocess.run([sys.executable, "-m", "fuzzer.cli", "audit", str(model), "--block-values", "100",
                           "--executors", "torch/eager", "--json", "--out", str(tmp_path / "out")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr[-3000:]
    verdict = json.loads(done.stdout)
    assert verdict["by_blocks"] and verdict["exit_status"] == 1
    broken = [b for b in verdict["blocks"] if b["hazards"] or b["input_casts"]]
    assert broken and all(b["name"].startswith("layers.") for b in broken), [b["name"] for b in verdict["blocks"]]


def test_healed_casts_the_first_dtype_break_so_the_blocks_past_it_are_fed_the_fixed_models_dtypes() -> None:
    """issue 37: past a dtype break (the DDPM step's float32 `noisy` into the bf16 UNet's conv_in) every value is
    float32 in the graph as captured, so every block after it met bf16 parameters with a float32 activation: 70 hazards
    of one cause. The healed graph casts the break's activation to its parameters' dtype, as the fix does: one cast,
    and the conv after it is bf16 all the way."""
    from fuzzer.audit.blocks import healed
    from fuzzer.ir import infer

    g = Graph((Input("x", (1, 2, 8, 8), "float32"), Input("w1", (2, 2, 3, 3), "bfloat16", "param"),
               Input("w2", (2, 2, 3, 3), "bfloat16", "param")),
              (Node("noisy", "mul", ("x", 2.0)), Node("c1", "conv2d", ("noisy", "w1")), Node("r", "relu", ("c1",)),
               Node("c2", "conv2d", ("r", "w2"))), ("c2",))
    assert set(infer(g).chain_breaks()) == {"c1", "c2"}
    fixed = healed(g)
    typed = infer(fixed)
    assert typed.chain_breaks() == {} and [n.op for n in fixed.nodes].count("astype") == 1
    assert typed.values["c1"].dtype == typed.values["c2"].dtype == "bfloat16" and typed.values["noisy"].dtype == "float32"
    assert healed(fixed) is fixed


def test_packed_values_round_trip_and_bad_ones_are_one_line_errors() -> None:
    """A packed spec (base64 of float64) makes the same values as a list; a bad one is a ValueSpecError."""
    import pytest

    from fuzzer.values import ValueSpecError, check_spec, make_values, pack

    arr = np.array([[1.5, -2.0, 3.25], [0.0, 1e-3, 7.0]])
    spec = pack(arr)
    check_spec(spec, (2, 3))
    assert make_values(spec, (2, 3), "float32").tolist() == make_values({"values": arr.tolist()}, (2, 3), "float32").tolist()
    for bad, why in (({"packed": "***", "shape": [2]}, "not base64"), ({**spec, "shape": [7]}, "not the 7"),
                     (pack(np.array([np.inf])), "finite")):
        with pytest.raises(ValueSpecError, match=why):
            check_spec(bad)


def test_a_script_makes_many_inline_values_from_their_packed_bytes() -> None:
    """A repro of a block with real weights: more than LISTED values are written packed, and evaluate to them."""
    from fuzzer.values import LISTED, inline_expr, pack

    small, big = np.arange(6.0).reshape(2, 3), np.linspace(-1, 1, LISTED + 1)
    assert inline_expr(pack(small), (2, 3)).startswith("np.broadcast_to(np.array([[0.0, 1.0, 2.0]")
    text = inline_expr(pack(big), (LISTED + 1,))
    assert "b64decode" in text and len(text) < 12 * big.size
    assert np.array_equal(eval(text, {"np": np}), big)  # noqa: S307 - our own expression


def _run(g: Graph) -> dict[str, np.ndarray]:
    """The float64 values of a block graph whose inputs hold arrays (packed first, as the audit does)."""
    from fuzzer.audit.blocks import _listed
    from fuzzer.interpret import evaluate

    g = Graph(tuple(_listed(i) for i in g.inputs), g.nodes, g.outputs)
    return evaluate(g, {i.name: inline(i.init) for i in g.inputs}, rounded=False)


def test_an_embedding_block_holds_only_the_rows_its_ids_read_and_looks_up_the_same_values() -> None:
    """A 1B decoder's embed_tokens is 65M values that 16 tokens read 16 rows of: the block's table is those rows, its
    ids renumbered (the same outputs); the llama_1b audit ran out of 23 GB on the whole table."""
    from fuzzer.audit.blocks import narrow_lookups

    table = np.arange(40.0).reshape(10, 4)
    ids = np.array([[7.0, 2.0, 7.0]])
    g = Graph((Input("w", (10, 4), "float32", "param", init={"values": table}),
               Input("ids", (1, 3), "int64", init={"values": ids})),
              (Node("e", "embedding", ("w", "ids")),), ("e",))
    narrow = narrow_lookups(g)
    assert narrow.input("w").shape == (2, 4)
    np.testing.assert_array_equal(_run(narrow)["e"], table[[[7, 2, 7]]])
    shared = Graph(g.inputs, g.nodes + (Node("s", "sum", ("w",)),), ("e", "s"))  # the table read elsewhere: kept
    assert narrow_lookups(shared) is shared


def test_a_linear_block_past_the_limit_is_split_by_output_features_into_blocks_of_one_structure() -> None:
    """An LM head (32000 x 2048) past the block limit becomes equal slices of its output features, weight rows and
    bias alike, each computing exactly its outputs; the slices share one structure (audited once)."""
    from fuzzer.audit.blocks import BlockCase, split_wide
    from fuzzer.ir import Case

    rng = np.random.default_rng(0)
    w, b, x = rng.normal(size=(12, 5)), rng.normal(size=12), rng.normal(size=(2, 5))
    g = Graph((Input("x", (2, 5), "float32", "param", init={"values": x}),
               Input("w", (12, 5), "float32", "param", init={"values": w}),
               Input("b", (12,), "float32", "param", init={"values": b})),
              (Node("y", "linear", ("x", "w", "b")),), ("y",))
    bc = BlockCase(Block("lm_head", ("y",)), Case(g, ({},), {"block": "lm_head"}))
    parts = split_wide(bc, limit=20)
    assert [p.block.name for p in parts] == ["lm_head [outputs 0:4]", "lm_head [outputs 4:8]", "lm_head [outputs 8:12]"]
    assert len({structure(p.case) for p in parts}) == 1
    got = np.concatenate([_run(p.case.graph)["y"] for p in parts], axis=-1)
    whole = _run(g)["y"]
    np.testing.assert_array_equal(got, whole)
    assert split_wide(bc, limit=60) == [bc]


def test_a_conv_block_past_the_limit_is_split_by_output_channels_and_a_grouped_one_is_not() -> None:
    """issue 37: UNet2DConditionModel's up_blocks.0.resnets.2.conv1 (2560 -> 1280, 3x3: 29.5M weights, one module
    and so one block) took the audit past 23 GB; an ungrouped conv's output channel j reads weight[j] and bias[j]
    only, so slices of output channels compute exactly the whole conv's channels. A grouped conv's channel also reads
    its group's inputs: left whole."""
    from fuzzer.audit.blocks import BlockCase, split_wide
    from fuzzer.ir import Case

    rng = np.random.default_rng(1)

    def conv_block(groups: int) -> BlockCase:
        x, w, b = rng.normal(size=(1, 4, 5, 5)), rng.normal(size=(6, 4 // groups, 3, 3)), rng.normal(size=6)
        g = Graph((Input("x", (1, 4, 5, 5), "float32", "param", init={"values": x}),
                   Input("w", w.shape, "float32", "param", init={"values": w}),
                   Input("b", (6,), "float32", "param", init={"values": b})),
                  (Node("y", "conv2d", ("x", "w", "b"), {"padding": 1, "groups": groups}),), ("y",))
        return BlockCase(Block("conv1", ("y",)), Case(g, ({},), {"block": "conv1"}))

    bc = conv_block(1)
    parts = split_wide(bc, limit=80)
    assert [p.block.name for p in parts] == ["conv1 [outputs 0:2]", "conv1 [outputs 2:4]", "conv1 [outputs 4:6]"]
    assert [p.case.graph.input("w").shape for p in parts] == [(2, 4, 3, 3)] * 3
    assert len({structure(p.case) for p in parts}) == 1
    got = np.concatenate([_run(p.case.graph)["y"] for p in parts], axis=1)
    np.testing.assert_allclose(got, _run(bc.case.graph)["y"], rtol=1e-14, atol=1e-14)  # float64 conv's own order
    grouped = conv_block(2)
    assert split_wide(grouped, limit=20) == [grouped]


def test_a_real_model_s_blocks_come_back_spilled_to_disk_and_load_one_at_a_time(tmp_path: Path) -> None:
    """issue 37: the blocks' cases (a real model's weights: gigabytes) are written by the model's process to the
    audit's folder and come back as paths, not through the pickle; each loads whole when its turn comes."""
    from fuzzer.audit.load import capture_isolated

    model = tmp_path / "stack.py"
    model.write_text(STACK)
    tr = capture_isolated(model, "make", "stack", 300.0, blocks=100, store=tmp_path / "store")
    assert tr.blocks and all(bc.case is None and Path(bc.path).is_file() for bc in tr.blocks)
    assert {bc.loaded().meta["block"] for bc in tr.blocks} == {bc.block.name for bc in tr.blocks}
    assert tr.bf16 is not None and all(bc.case is None for bc in tr.bf16.blocks)
    assert {p.parent.name for p in (tmp_path / "store").rglob("block*.json")} == {"float32", "bfloat16"}


def test_regression_activations_under_autocast_are_recorded_past_exports_dtype_asserts() -> None:
    """UNet2DModel() at real size: torch.export writes `x.to(float32)` with an _assert_tensor_metadata of the dtype it
    traced; the run under autocast tripped it ("Tensor dtype mismatch! Expected: Float, Got: c10::BFloat16") and no
    block got the autocast activations."""
    import torch

    from fuzzer.audit.blocks import record

    class Casts(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(self.a(x).to(torch.float32))

    module, args = Casts().eval(), (torch.randn(2, 4),)
    ep = torch.export.export(module, args)
    assert any("_assert_tensor_metadata" in str(n.target) for n in ep.graph_module.graph.nodes)
    made = {"h": ([n.name for n in ep.graph_module.graph.nodes if "linear" in str(n.target)][0], None)}
    plain = record(ep, module, args, made, {"h"})
    under = record(ep, module, args, made, {"h"}, autocast="bfloat16")
    assert not np.array_equal(plain["h"], under["h"])
    import ml_dtypes

    assert np.array_equal(under["h"], under["h"].astype(ml_dtypes.bfloat16).astype(np.float64))  # autocast's bf16


def test_regression_a_float32_cast_export_baked_into_a_float32_capture_is_read_as_the_modules_dtype() -> None:
    """issue 37, the DDPM step: the module raises as it is, so it is captured with float32 parameters, and torch.export
    writes diffusers' `t_emb.to(dtype=self.dtype)` (and the attention processor's `.to(query.dtype)`) as casts to
    float32; declared with the module's bf16 parameters, each made a false raise hazard at the linear after it (eight
    at real size). A float32 -> float32 cast reaching a break is such a cast: it casts to the parameters' dtype. The
    real break (a computed float32 value meeting conv_in) stays."""
    from fuzzer.audit.translate import unbaked
    from fuzzer.ir import infer

    g = Graph((Input("t", (1, 4), "float32"), Input("w", (4, 4), "bfloat16", "param"), Input("x", (1, 4), "float32"),
               Input("w2", (4, 4), "bfloat16", "param")),
              (Node("to_1", "astype", ("t",), {"dtype": "float32"}), Node("flat", "reshape", ("to_1",), {"shape": [1, 4]}),
               Node("lin", "linear", ("flat", "w")), Node("noisy", "mul", ("x", 2.0)), Node("lin2", "linear", ("noisy", "w2"))),
              ("lin", "lin2"))
    fixed, casts = unbaked(g)
    assert casts == ["to_1"] and set(infer(fixed).chain_breaks()) == {"lin2"}
    assert fixed.node("to_1").attrs["dtype"] == "bfloat16" and unbaked(fixed) == (fixed, [])
