"""fp8 as first-class dtypes (issue 25): PyTorch's cast semantics, promotion, the scaled_mm and amax records, the
oracles' fp8 rule, each backend on edge values, the generator share, and the regressions fp8 found in precfuzz."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch

from fuzzer.check import Checker
from fuzzer.dtypes import FLOAT_FORMATS, FP8, cast_results, past_fp8_range, round_to
from fuzzer.executors import create
from fuzzer.interpret import evaluate, ideal_values
from fuzzer.ir import Case, Graph, Input, IRError, Node, infer, input_values, load_case
from fuzzer.isolation import ExecutorPool
from fuzzer.ops.scaled import OUT_DTYPES
from fuzzer.promotion import PromotionError, promote_types
from oracles.bounds import error_stats, rounding_ratio, ulp
from oracles.bugs import bug_key, title
from oracles.cast_semantics import CLASS, range_violation
from oracles.error_bounds import single_rounding
from oracles.findings import Finding
from oracles.nodes import judge_nodes

E4, E5 = "float8_e4m3fn", "float8_e5m2"
NAN = math.nan
# value -> (float8_e4m3fn, float8_e5m2) as PyTorch 2.9.1 casts a float32 tensor on the CPU (measured; the contract)
CAST_TABLE = {
    0.0: (0.0, 0.0),
    2.0**-10: (0.0, 2.0**-10),  # half e4m3fn's smallest subnormal: ties to 0; a normal e5m2 number
    2.0**-9: (2.0**-9, 2.0**-9),  # e4m3fn's smallest subnormal
    1.5 * 2.0**-9: (2.0**-8, 1.5 * 2.0**-9),  # ties to even (2 subnormal units)
    2.0**-17: (0.0, 0.0),  # half e5m2's smallest subnormal: ties to 0
    3 * 2.0**-17: (0.0, 2.0**-15),  # 1.5 e5m2 subnormal units: ties to even
    1.0625: (1.0, 1.0),  # the tie between 1 and 1.125 (e4m3fn): to even
    1.0625 + 2.0**-20: (1.125, 1.0),
    448.0: (448.0, 448.0),  # e4m3fn's largest finite value
    464.0: (448.0, 448.0),  # the tie past it rounds back to 448 (even)
    464.0625: (NAN, 448.0),  # past the tie: NaN, e4m3fn has no inf
    -500.0: (NAN, -512.0),
    57344.0: (NAN, 57344.0),  # e5m2's largest finite value
    61439.0: (NAN, 57344.0),
    61440.0: (NAN, math.inf),  # the tie past 57344 rounds to 2**16: inf
    1e6: (NAN, math.inf),
}
EDGES = [v for v in CAST_TABLE]


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal values, NaN equal to NaN, signs of zeros ignored."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


# ---------------------------------------------------------------- dtypes and PyTorch's cast semantics


@pytest.mark.parametrize("fmt", FP8)
def test_round_to_is_pytorchs_cast_on_every_float16_value_and_float64_noise(fmt: str) -> None:
    rng = np.random.default_rng(0)
    halves = np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float64)
    noise = np.concatenate([rng.normal(0, 300, 20000), 10 ** rng.uniform(-12, 6, 20000) * rng.choice([-1, 1], 20000)])
    x = np.concatenate([halves, noise, [464 + 2.0**-20, 61440 - 2.0**-20, 1e300, -1e300]])
    want = torch.from_numpy(x).to(getattr(torch, fmt)).double().numpy()  # torch goes through float32
    assert same(round_to(x, fmt), want)
    with np.errstate(over="ignore", invalid="ignore"):
        x32 = x.astype(np.float32)  # ml_dtypes agrees with torch from float32 (from float64 it rounds once)
    assert same(x32.astype(getattr(ml_dtypes, fmt)).astype(np.float64), round_to(x32, fmt))


def test_cast_table_is_what_torch_and_round_to_give() -> None:
    x = np.array(EDGES)
    for k, fmt in enumerate(FP8):
        want = np.array([CAST_TABLE[v][k] for v in EDGES])
        assert same(torch.tensor(x, dtype=torch.float32).to(getattr(torch, fmt)).double().numpy(), want), fmt
        assert same(round_to(x, fmt), want), fmt
        assert np.array_equal(past_fp8_range(x, fmt), np.isnan(want) | np.isinf(want))


def test_fp8_formats_and_ulps_are_the_formats_own() -> None:
    for fmt in FP8:
        info = ml_dtypes.finfo(getattr(ml_dtypes, fmt))
        f = FLOAT_FORMATS[fmt]
        assert (f.mantissa_bits, f.min_exponent, f.max_value) == (info.nmant, info.minexp, float(info.max))
        assert float(ulp(1.0, fmt)) == 2.0**-f.mantissa_bits
        assert float(ulp(0.0, fmt)) == float(info.smallest_subnormal)
        assert float(ulp(f.max_value, fmt)) == f.max_value - float(np.nextafter(
            np.array(f.max_value, dtype=getattr(ml_dtypes, fmt)), np.array(0, dtype=getattr(ml_dtypes, fmt))))


PROMOTION_DTYPES = ["float16", "bfloat16", "float32", "float64", "int32", "int64", "bool", E4, E5]


@pytest.mark.parametrize("a, b", list(itertools.product(FP8, PROMOTION_DTYPES)))
def test_promotion_with_fp8_raises_where_pytorch_raises(a: str, b: str) -> None:
    try:
        want = str(torch.promote_types(getattr(torch, a), getattr(torch, b))).replace("torch.", "")
    except RuntimeError:
        want = None
    if want is None:
        with pytest.raises(PromotionError):
            promote_types(a, b)
    else:
        assert promote_types(a, b) == want


@pytest.mark.parametrize("kinds", [("tensor", "tensor"), ("tensor", "zerodim"), ("zerodim", "tensor"),
                                   ("tensor", "scalar")])
@pytest.mark.parametrize("other", ["float32", "bfloat16", "int64", "bool", E5])
def test_mixed_fp8_operands_type_as_torch_result_type_or_are_one_line_errors(kinds: tuple[str, str],
                                                                             other: str) -> None:
    """torch.result_type decides (a kernel may still be missing: PyTorch's CPU has few fp8 kernels)."""
    ka, kb = kinds
    if kb == "scalar":
        other = "float64"
    a = Input("a", (2,) if ka == "tensor" else (), E4)
    b = Input("b", (2,) if kb == "tensor" else (), other, kind="scalar" if kb == "scalar" else "tensor")
    graph = Graph((a, b), (Node("y", "mul", ("a", "b")),), ("y",))
    ta = torch.zeros(a.shape, dtype=torch.float8_e4m3fn)
    tb = 2.0 if kb == "scalar" else torch.zeros(b.shape, dtype=getattr(torch, other))
    try:
        want = str(torch.result_type(ta, tb)).replace("torch.", "")
    except RuntimeError:
        with pytest.raises(IRError, match="node 'y'.*float8"):
            infer(graph)
        return
    assert infer(graph).values["y"].dtype == want


# ---------------------------------------------------------------- the exact answer of a cast past the range


def test_cast_exact_answer_past_the_range_is_pytorchs_nan_or_inf() -> None:
    x = np.array(EDGES)
    graph = Graph((Input("x", (len(x),), "float32", init={"values": EDGES}),),
                  (Node("q", "astype", ("x",), {"dtype": E4}), Node("r", "astype", ("x",), {"dtype": E5})), ("q", "r"))
    exact = evaluate(graph, input_values(Case(graph), 0), rounded=False)
    x32 = x.astype(np.float32).astype(np.float64)
    assert same(exact["q"], np.where(past_fp8_range(x, E4), np.nan, x32))  # in range: not rounded (the exact answer)
    assert same(exact["r"], np.where(past_fp8_range(x, E5), np.copysign(np.inf, x), x32))
    exact_ideal, f32_ideal, perturbed = ideal_values(graph, input_values(Case(graph), 0))["q"]
    in_range = ~past_fp8_range(x, E4)  # judged element by element, not all-NaN ideals
    assert np.isfinite(exact_ideal).sum() == np.isfinite(f32_ideal).sum() == in_range.sum()
    assert np.isfinite(perturbed).sum() == in_range.sum() - 1  # 464 perturbed lands past the tie: not judged there


def test_range_violation_names_saturation_and_wrapping() -> None:
    x = np.array([1.0, 500.0, -600.0, 3.0])
    assert range_violation(x, np.array([1.0, np.nan, np.nan, 3.0]), E4) is None
    sat = range_violation(x, np.array([1.0, 448.0, -448.0, 3.0]), E4)
    assert sat is not None and (sat.count, sat.how, sat.pytorch, sat.example) == (2, "saturates", "NaN", (500.0, 448.0))
    wrap = range_violation(x, np.array([1.0, -0.0078125, np.nan, 3.0]), E4)
    assert wrap is not None and (wrap.count, wrap.how) == (1, "wraps")
    assert range_violation(np.array([1e5]), np.array([57344.0]), E5).pytorch == "inf"
    assert range_violation(x, x, "float16") is None


def test_dtype_semantics_finding_has_its_own_key_and_title() -> None:
    f = Finding("error-bound", "tvm/default", ["astype"], ["float32->float8_e4m3fn"], CLASS, "q wraps",
                details={"cast_range": "wraps", "pytorch_gives": "NaN"})
    assert bug_key(replace(f, executor="xla/native")) == \
        "backend-bug|torch_xla|astype|dtype-semantics|float8|*"
    # TVM: its float8 conversion (FpToFp) wraps on encode and misreads zero/NaN codes on decode (triage11): two
    # defects, one record per direction (sample30 #2, #23); a scaled_mm decodes with it
    assert bug_key(f) == "backend-bug|tvm|float8-encode|accuracy|float8|*"
    decode = Finding("error-bound", "tvm/default", ["astype"], ["float8_e4m3fn->float32"], "bound", "0 -> 2^-7")
    scaled = Finding("error-bound", "tvm/default", ["scaled_mm"], ["float8_e4m3fn,float8_e5m2,float32,float32->bfloat16"],
                     "bound", "decodes -0 as -2^-7")
    assert bug_key(decode) == bug_key(scaled) == "backend-bug|tvm|float8-decode|accuracy|float8|*"
    assert title(f) == ("[TVM] (float32 -> float8_e4m3fn) astype wraps past the format's range where PyTorch's cast "
                        "gives NaN (tvm/default)")
    other = Finding("error-bound", "tvm/default", ["astype"], ["float32->float8_e5m2"], CLASS, "r wraps")
    assert bug_key(other) == bug_key(f)  # one conversion routine: one bug for both formats


# ---------------------------------------------------------------- the op records


@pytest.mark.parametrize("out_dtype", OUT_DTYPES)
@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 5, 7), (16, 64, 8), (4, 1000, 3)])
def test_scaled_mm_reference_against_torch(shape: tuple[int, int, int], out_dtype: str) -> None:
    """PyTorch's CPU _scaled_mm is within the bound of the ideal (fp8 products accumulated in float32, scaled once);
    its float32 output is the float32-arithmetic ideal to a few float32 units of the largest value."""
    m, k, n = shape
    rng = np.random.default_rng(m * k * n)
    inputs = (Input("a", (m, k), E4, init={"dist": "normal", "std": 8.0, "seed": 1}),
              Input("b", (k, n), E5, init={"dist": "wide", "lo": -4.0, "hi": 2.0, "seed": 2}),
              Input("sa", (), "float32", init={"dist": "constant", "value": float(rng.uniform(0.01, 3))}),
              Input("sb", (1,), "float32", init={"dist": "constant", "value": float(rng.uniform(0.01, 3))}))
    graph = Graph(inputs, (Node("y", "scaled_mm", ("a", "b", "sa", "sb"), {"out_dtype": out_dtype}),), ("y",))
    values = input_values(Case(graph), 0)
    exact = evaluate(graph, values, rounded=False)["y"]
    ideal = ideal_values(graph, values)["y"]
    ex = create("torch/eager")
    (got,), dtypes, _ = ex.execute(ex.prepare(graph), graph, values)
    assert dtypes == [out_dtype]
    assert error_stats(got, exact, ideal, out_dtype).ratio <= 1.0
    if out_dtype == "float32":
        f32 = evaluate(graph, values, rounded=True, arithmetic="float32")["y"]
        assert np.max(np.abs(got - f32)) <= 8 * ulp(np.max(np.abs(f32)), "float32")  # another summation order


@pytest.mark.parametrize("a, b, sa, what", [
    (("bfloat16", (4, 8)), (E4, (8, 3)), ("float32", ()), "a must be float8"),
    ((E4, (4, 8)), (E4, (8, 3)), ("float32", (4, 1)), "scale_a must be"),
    ((E4, (2, 4, 8)), (E4, (8, 3)), ("float32", ()), r"\[M, K\] @ \[K, N\]"),
    ((E4, (4, 8)), (E4, (7, 3)), ("float32", ()), r"\[M, K\] @ \[K, N\]"),
])
def test_scaled_mm_refuses_what_torch_refuses(a, b, sa, what) -> None:
    inputs = (Input("a", a[1], a[0]), Input("b", b[1], b[0]), Input("sa", sa[1], sa[0]), Input("sb", (), "float32"))
    graph = Graph(inputs, (Node("y", "scaled_mm", ("a", "b", "sa", "sb")),), ("y",))
    with pytest.raises(IRError, match=what):
        infer(graph)
    one = torch.tensor(1.0)
    with pytest.raises(RuntimeError):
        torch._scaled_mm(torch.zeros(a[1], dtype=getattr(torch, a[0])), torch.zeros(b[1], dtype=getattr(torch, b[0])),
                         scale_a=torch.ones(sa[1]), scale_b=one, out_dtype=torch.float32)


def test_amax_reference_is_torch_amax_nan_included() -> None:
    x = np.array([[1.0, -3.0, 2.0], [0.5, np.nan, -7.0]])
    graph = Graph((Input("x", (2, 3), "float32"),), (Node("m", "amax", ("x",), {"dims": [1], "keepdim": True}),
                                                      Node("a", "amax", ("x",))), ("m", "a"))
    out = evaluate(graph, {"x": x}, rounded=False)
    assert same(out["m"], torch.amax(torch.tensor(x), dim=[1], keepdim=True).numpy())
    assert np.isnan(out["a"]) and out["a"].shape == ()


# ---------------------------------------------------------------- each backend on edge values


def roundtrip_case(fmt: str = E4, back: str = "float32") -> Case:
    """float32 edge values -> fp8 -> float32 (the Done-when case)."""
    graph = Graph((Input("x", (len(EDGES),), "float32", init={"values": EDGES}),),
                  (Node("q", "astype", ("x",), {"dtype": fmt}), Node("y", "astype", ("q",), {"dtype": back})), ("y",))
    return Case(graph)


@pytest.fixture(scope="module")
def pool():
    with ExecutorPool(["torch/eager", "xla/native", "tvm/default", "tvm/decompose"], timeout=300.0) as p:
        yield p


@pytest.mark.parametrize("fmt", FP8)
def test_cast_semantics_per_backend_on_edge_values(pool: ExecutorPool, fmt: str) -> None:
    """torch/eager is the table; torch_xla agrees where the fp8 value is converted back inside the program; TVM's LLVM
    codegen wraps past the range and decodes zero and subnormals wrongly (real TVM bugs, reported by the oracles)."""
    k = FP8.index(fmt)
    case = roundtrip_case(fmt)
    sets = [input_values(case, 0)]
    want = np.array([CAST_TABLE[v][k] for v in EDGES])
    (eager,) = pool.run("torch/eager", case.graph, sets)
    (xla,) = pool.run("xla/native", case.graph, sets)
    (tvm,) = pool.run("tvm/default", case.graph, sets)
    assert same(eager.outputs[0], want) and same(xla.outputs[0], want)
    assert tvm.ok and not same(tvm.outputs[0], want)
    assert tvm.outputs[0][EDGES.index(0.0)] != 0.0  # fp8 zero comes back as 2**-7 (e4m3fn) or 2**-15 (e5m2)


def test_check_fp32_e4m3fn_fp32_round_trip_is_clean_on_eager_and_xla_and_judges_tvm(pool: ExecutorPool) -> None:
    result = Checker(pool).check(roundtrip_case(), ["torch/eager", "xla/native", "tvm/default", "tvm/decompose"])
    by = {f.executor: f for f in result.findings}
    assert "torch/eager" not in by and "xla/native" not in by
    for name in ("tvm/default", "tvm/decompose"):
        f = by[name]
        assert (f.kind, f.oracle, f.error_class, f.node, f.details["cast_range"]) == (
            "backend-bug", "error-bound", CLASS, "q", "wraps"), f.message


def test_torch_xla_fp8_graph_output_rounds_through_float16(pool: ExecutorPool) -> None:
    """torch_xla 2.9 on PJRT CPU: a float32 -> fp8 convert that is a graph output rounds twice (through float16),
    so 464.0625 -> 448 where PyTorch gives NaN: a dtype-semantics finding (the fused round trip above is right)."""
    graph = Graph((Input("x", (4,), "float32", init={"values": [1.0, 464.0625, -464.1, 1.0625 + 2.0**-20]}),),
                  (Node("q", "astype", ("x",), {"dtype": E4}),), ("q",))
    (xla,) = pool.run("xla/native", graph, [input_values(Case(graph), 0)])
    assert xla.dtypes == [E4] and xla.info["device_dtypes"] == [E4]
    assert same(xla.outputs[0], [1.0, 448.0, -448.0, 1.0])  # PyTorch: [1, nan, nan, 1.125]
    result = Checker(pool).check(Case(graph), ["torch/eager", "xla/native"])
    (f,) = result.findings
    assert (f.executor, f.error_class, f.details["cast_range"]) == ("xla/native", CLASS, "saturates")


# ---------------------------------------------------------------- regressions fp8 found in precfuzz


def test_regression_a_node_of_another_shape_is_a_verdict_not_a_crash() -> None:
    """torch_xla's amax(x) (no dims) returns x unreduced; the probe fed that [4, 8] value to the next node as if it were
    the declared 0-dim one and the checker died broadcasting it (internal error). Now it is the node's verdict."""
    inputs = (Input("x", (4, 8), "bfloat16", init={"dist": "normal", "seed": 3}),)
    nodes = (Node("a", "abs", ("x",)), Node("m", "amax", ("a",)), Node("s", "div", (448.0, "m")),
             Node("y", "mul", ("x", "s")))
    graph = Graph(inputs, nodes, ("y",))
    values = input_values(Case(graph), 0)
    exact = evaluate(graph, values, rounded=False)
    observed = {"a": exact["a"], "m": exact["a"], "s": 448.0 / exact["a"], "y": 448.0 * np.sign(exact["x"])}
    verdicts = {v.node: v for v in judge_nodes(graph, values, observed)}
    assert verdicts["m"].shape == (4, 8) and verdicts["m"].stats.nonfinite_mismatch
    assert verdicts["a"].shape is None and verdicts["a"].stats.ratio <= 1.0


@pytest.mark.slow
def test_regression_torch_xla_amax_without_dims_is_a_shape_finding(pool: ExecutorPool, tmp_path) -> None:
    """torch_xla 2.9: torch.amax(x) (dim=[], every dim in PyTorch) returns x unreduced. The finding's short script
    compared values that broadcast and printed OK; it now compares the shapes and exits 1."""
    import subprocess
    import sys

    from fuzzer.repro import render

    inputs = (Input("x", (4, 8), "bfloat16", init={"dist": "normal", "seed": 3}),)
    nodes = (Node("a", "abs", ("x",)), Node("m", "amax", ("a",)), Node("s", "div", (448.0, "m")),
             Node("y", "mul", ("x", "s")))
    case = Case(Graph(inputs, nodes, ("y",)))
    result = Checker(pool).check(case, ["torch/eager", "xla/native", "tvm/default"])
    (f,) = result.findings
    assert (f.executor, f.ops, f.error_class, f.node) == ("xla/native", ["amax"], "shape", "m")
    assert "returns shape [4, 8] where PyTorch's is []" in f.message
    one = Case(Graph((Input("a", (2,), "float16", init={"dist": "constant", "value": 1.0}),),
                     (Node("m", "amax", ("a",)),), ("m",)))
    script = tmp_path / "repro.py"
    script.write_text(render(one, f, create("xla/native"), title(f)))
    done = subprocess.run([sys.executable, "-I", str(script)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr[-2000:]
    assert "xla/native returns shape (2,), PyTorch eager on the CPU ()" in done.stdout


def test_regression_an_error_after_a_shape_departure_is_blamed_on_the_node_of_another_shape(pool: ExecutorPool) -> None:
    """triage8 bb1cf41878: torch_xla's scaled_mm raised "(scale_a.numel() == 1 && scale_b.numel() == 1) INTERNAL
    ASSERT FAILED" because its scale came from amax(x), which torch_xla 2.9 leaves unreduced; the record blamed
    scaled_mm (a second bug, 18 nodes the minimizer could not cut). The error is the amax shape bug's."""
    inputs = (Input("x", (4, 16), "float32", init={"dist": "normal", "seed": 5}),
              Input("w", (8, 16), "float32", init={"dist": "normal", "seed": 6}))
    nodes = (Node("a", "abs", ("x",)), Node("m", "amax", ("a",)), Node("s", "div", (1.0, "m")),
             Node("x8", "astype", ("x",), {"dtype": E4}), Node("w8", "astype", ("w",), {"dtype": E4}),
             Node("wt", "transpose", ("w8",), {"dim0": 0, "dim1": 1}),
             Node("mm", "scaled_mm", ("x8", "wt", "s", "s"), {"out_dtype": "float32"}))
    result = Checker(pool).check(Case(Graph(inputs, nodes, ("mm",))), ["torch/eager", "xla/native"])
    (f,) = [f for f in result.findings if f.executor == "xla/native"]
    assert (f.ops, f.error_class, f.node) == (["amax"], "shape", "m"), f
    assert "returns shape [4, 16] where PyTorch's is []" in f.message and "mm (scaled_mm) then raises" in f.message
    assert bug_key(f) == "backend-bug|torch_xla|amax|shape|*|*"
    # triage8 b8382b9cf6: the unreduced amax made the scale a shaped float32 tensor, so x * scale returned float32
    # where PyTorch's bfloat16 (a 0-dim float32 does not promote): a dtype finding on mul, the same amax bug
    bf = (Input("x", (4, 16), "bfloat16", init={"dist": "normal", "seed": 5}),)
    scaled = (Node("m", "amax", ("x",)), Node("m32", "astype", ("m",), {"dtype": "float32"}),
              Node("y", "mul", ("x", "m32")))
    found = Checker(pool).check(Case(Graph(bf, scaled, ("y",))), ["torch/eager", "xla/native"]).findings
    assert {(g.executor, g.signature, g.node, bug_key(g)) for g in found} == {
        ("xla/native", "error-bound|xla/native|amax|bfloat16->bfloat16|shape", "m", bug_key(f))}, found


# ---------------------------------------------------------------- generators and Neuron


@pytest.mark.slow
def test_generate_2000_has_at_least_100_fp8_cases_all_valid() -> None:
    from generators.coverage import reference_problem
    from generators.graphs import generate_case

    fp8 = []
    for i in range(2000):
        case = generate_case(0, i)
        if any(v.dtype in FP8 for v in infer(case.graph).values.values()):
            fp8.append(case)
    assert len(fp8) >= 100
    assert [c.meta["index"] for c in fp8 if reference_problem(c) is not None] == []


def test_generated_fp8_cases_run_on_eager() -> None:
    from generators.graphs import generate_case

    ex = create("torch/eager")
    kinds = set()
    for i in range(40):
        case = generate_case(5, i, ["fp8"])
        kinds.add(case.meta["detail"]["fp8"])
        for o in ex.run_case(case.graph, [input_values(case, k) for k in range(len(case.input_sets))]):
            assert o.ok, (i, o.summary())
    assert kinds == {"qdq", "scaled_mm", "linear", "kv_cache", "edges"}


def test_neuron_fp8_auto_cast_row_judges_matmults_in_e4m3fn_saturating() -> None:
    from op_examples import example

    ex = create("neuron/auto-cast-matmult-fp8")
    assert "--auto-cast=matmult --auto-cast-type=fp8_e4m3" == ex.env()["NEURON_CC_FLAGS"]
    numeric = ex.numeric_graph(example("linear", "float32").graph)
    ops = [(n.op, n.attrs.get("dtype"), n.attrs.get("max")) for n in numeric.nodes]
    assert ops[:2] == [("clamp", None, 448.0), ("astype", E4, None)] and ops[-1] == ("astype", "float32", None)
    assert infer(numeric).values["out"].dtype == "float32"


def test_run_families_option_names_known_families_with_their_weights() -> None:
    from fuzzer.commands.common import UsageError
    from fuzzer.commands.run import families_from
    from generators.graphs import FAMILIES

    assert families_from(None) is None
    assert families_from(" fp8,cast ") == {"fp8": float(FAMILIES["fp8"][0]), "cast": float(FAMILIES["cast"][0])}
    for bad in ("nope", ",", "fp8,nope"):
        with pytest.raises(UsageError, match="--families"):
            families_from(bad)
    from fuzzer.commands.run import _generate_among

    assert {_generate_among(["fp8"], 0, i).meta["family"] for i in range(5)} == {"fp8"}  # uniform
    assert _generate_among(["fp8", "cast"], 0, 0, ["cast"]).meta["family"] == "cast"  # adaptive steering


def test_regression_flushing_of_a_contraction_is_judged_not_a_crash() -> None:
    """fp8 campaign: flushing_explains asked np.broadcast_to whether a scaled_mm operand [7, 63] has the result's
    shape [7, 10]; numpy raises instead of saying no, and the case became an internal error (fixed on main the
    same day; this is the fp8 case)."""
    from oracles.nodes import flushing_explains, node_graph

    inputs = (Input("a", (7, 63), E4), Input("b", (63, 10), E4), Input("sa", (), "float32"), Input("sb", (), "float32"))
    graph = Graph(inputs, (Node("y", "scaled_mm", ("a", "b", "sa", "sb")),), ("y",))
    rng = np.random.default_rng(0)
    values = {"a": round_to(rng.normal(0, 0.01, (7, 63)), E4), "b": round_to(rng.normal(0, 1, (63, 10)), E4),
              "sa": np.array(1.0), "sb": np.array(1.0)}
    exact = evaluate(graph, values, rounded=False)["y"]
    assert flushing_explains(node_graph(graph, "y"), values, exact * 1.5, "float32") is False


def test_a_shape_finding_is_one_bug_whatever_the_dtype() -> None:
    """fp8 campaign: torch_xla's unreduced amax(x) was two records, one per dtype that showed it."""
    keys = {bug_key(Finding("error-bound", "xla/native", ["amax"], [f"{d}->{d}"], "shape", "m returns shape [2]"))
            for d in ("float32", "float16", "bfloat16")}
    assert keys == {"backend-bug|torch_xla|amax|shape|*|*"}


def test_regression_the_minimizer_retypes_fp8_inputs() -> None:
    """fp8 campaign: simpler_dtypes looked an fp8 input up in its cost table (KeyError), so every fp8 bug went
    unminimized ('minimizing failed: KeyError: float8_e5m2')."""
    from fuzzer.minimize.value_passes import simpler_dtypes

    inputs = (Input("a", (2, 3), E5), Input("b", (3, 2), E4), Input("sa", (), "float32"), Input("sb", (), "float32"))
    case = Case(Graph(inputs, (Node("y", "scaled_mm", ("a", "b", "sa", "sb")),), ("y",)))
    labels = [c.label for c in simpler_dtypes(case)]  # float32 operands or fp8 scales: invalid, not offered
    assert labels == ["dtype float8_e5m2 -> float8_e4m3fn", "dtype float8_e4m3fn -> float8_e5m2"]


def test_tvm_mixed_precision_declares_scaled_mm_a_harness_limit() -> None:
    """ToMixedPrecision stores the fp8 product's float32 accumulator in float16 (measured: 2.2e-4 relative error,
    either lowering) and no IR policy states that: precfuzz's limit, never judged as TVM's."""
    from fuzzer.outcome import HARNESS_LIMIT

    inputs = (Input("a", (2, 8), E4), Input("b", (8, 2), E4), Input("sa", (), "float32"), Input("sb", (), "float32"))
    case = Case(Graph(inputs, (Node("y", "scaled_mm", ("a", "b", "sa", "sb")),), ("y",)))
    (out,) = create("tvm/mixed-precision").run_case(case.graph, [input_values(case, 0)])
    assert out.status == "unsupported" and out.message.startswith(HARNESS_LIMIT) and "scaled_mm" in out.message


def run_script(path, text: str):
    """Run a repro script as a user would (python -I); the completed process."""
    import subprocess
    import sys

    path.write_text(text)
    return subprocess.run([sys.executable, "-I", str(path)], capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_regression_fp8_repro_scripts_take_the_exact_answer_from_numpy(pool: ExecutorPool, tmp_path) -> None:
    """fp8 campaign: a torch script's exact answer ran the program in float64, which _scaled_mm refuses (the
    script crashed, exit 2) and which casts past the fp8 range without PyTorch's NaN; NaN = NaN counted as an
    error, so a fixed backend would still have failed. The numpy form is the exact answer now, NaN agrees with NaN."""
    from fuzzer.repro import render

    result = Checker(pool).check(roundtrip_case(), ["torch/eager", "tvm/default"])
    (f,) = result.findings
    text = render(roundtrip_case(), f, create("tvm/default"), title(f))
    done = run_script(tmp_path / "tvm.py", text)
    assert done.returncode == 1 and "BUG REPRODUCED" in done.stdout, done.stdout + done.stderr[-2000:]
    fixed = text.replace("got = run(DECLARED)", "got = [inputs[0].astype(ml_dtypes.float8_e4m3fn).astype(np.float32)]")
    done = run_script(tmp_path / "fixed.py", fixed)  # a TVM that casts as PyTorch does
    assert done.returncode == 0 and "OK" in done.stdout, done.stdout + done.stderr[-2000:]

    inputs = (Input("a", (1, 1), E5, init={"dist": "constant", "value": 1.0}),
              Input("b", (1, 8), E4, init={"dist": "uniform", "low": -1.0, "high": 1.0, "seed": 4}),
              Input("sa", (), "float32", init={"dist": "constant", "value": 1.0}),
              Input("sb", (), "float32", init={"dist": "constant", "value": 1e-4}))
    case = Case(Graph(inputs, (Node("y", "scaled_mm", ("a", "b", "sa", "sb")),), ("y",)))
    with ExecutorPool(["torch/eager", "torch/autocast"], timeout=300.0) as cpu:
        (f,) = Checker(cpu).check(case, ["torch/eager", "torch/autocast"]).findings
    assert f.executor == "torch/autocast" and f.ops == ["scaled_mm"]  # its matmul in bfloat16: see the triage
    done = run_script(tmp_path / "autocast.py", render(case, f, create("torch/autocast"), title(f)))
    assert done.returncode == 1 and "BUG REPRODUCED" in done.stdout, done.stdout + done.stderr[-2000:]


# module-scoped fixtures (worker pools, a cluster) are built once: every test of this file on one xdist worker
pytestmark = pytest.mark.xdist_group(name="test_fp8")


def test_regression_the_legacy_bf16_numeric_graph_of_a_scaled_mm_keeps_float32_scales() -> None:
    """`make bench` (seed 1, case 1) and triage11 stopped on an internal error: XLA_USE_BF16's numeric graph declared
    every float32 value bfloat16, the scales of scaled_mm too, which PyTorch (and the IR) take only in float32."""
    inputs = (Input("a", (4, 8), E4, init={"dist": "normal", "seed": 1}),
              Input("b", (16, 8), E4, init={"dist": "normal", "seed": 2}),
              Input("s", (), "float32", init={"dist": "constant", "value": 0.5}))
    nodes = (Node("bt", "transpose", ("b",), {"dim0": 0, "dim1": 1}),
             Node("mm", "scaled_mm", ("a", "bt", "s", "s"), {"out_dtype": "float32"}))
    numeric = create("xla/legacy-bf16").numeric_graph(Graph(inputs, nodes, ("mm",)))
    typed = infer(numeric)  # raised IRError: scale_b must be a float32 tensor
    assert typed.values["s"].dtype == "bfloat16" and typed.values["mm"].kind == "tensor"
    assert [n.op for n in numeric.nodes].count("astype") == 2


# ---------------------------------------------------------------- issue 33: a cast is a single rounding


FIXTURES = Path(__file__).parent / "fixtures"


def test_a_single_rounding_allows_half_an_ulp_of_the_target_format_and_nothing_more() -> None:
    """The correctly rounded value scores 0; its neighbour (a whole ULP, the subnormal spacing at zero, the finer
    spacing below a power of two) scores 2, a finding's margin, whatever the arithmetic ideals would allow."""
    x = np.array([0.0, 2.0**-9, 1.0, 100.0, 0.3])
    rounded = round_to(x, E4)  # 0, 2**-9, 1, 96, 0.3125
    assert rounding_ratio(rounded, rounded, E4)[0] == 0.0
    for k, off in [(0, 2.0**-9), (1, -2.0**-9), (2, -2.0**-4), (3, 8.0), (4, 2.0**-5)]:
        wrong = rounded.copy()
        wrong[k] += off
        assert rounding_ratio(wrong, rounded, E4)[:3] == (2.0, 1.0, k), (k, off)
    st = error_stats(rounded + np.eye(5)[0] * 2.0**-7, x, [rounded], E4, rounded=rounded)
    assert (st.ratio, st.max_abs) == (8.0, 2.0**-7)
    assert error_stats(rounded + np.eye(5)[0] * 2.0**-7, x, [rounded], E4).ratio < 1.0  # the arithmetic bound


def test_single_rounding_reference_follows_the_chain_of_casts_of_an_input() -> None:
    """An output made by casts of an input alone is held to the casts' rounding (fp8 NaN past the range kept); one
    with arithmetic on the way is not."""
    graph = Graph((Input("x", (3,), "float32"),),
                  (Node("q", "astype", ("x",), {"dtype": E4}), Node("y", "astype", ("q",), {"dtype": "float16"}),
                   Node("z", "mul", ("y", 2.0), {}), Node("w", "astype", ("z",), {"dtype": "float32"})), ("y", "w"))
    values = evaluate(graph, {"x": np.array([0.0029296875, 100.0, 500.0])}, rounded=False)
    correct, as_pytorch = single_rounding(graph, "y", values)  # one rounding each; PyTorch's (float32 operands: same)
    assert same(correct, [2.0**-8, 96.0, NAN]) and same(as_pytorch, [2.0**-8, 96.0, NAN])
    assert single_rounding(graph, "w", values) is None and single_rounding(graph, "x", values) is None


def test_regression_a_cast_is_judged_as_a_single_rounding_not_as_arithmetic(pool: ExecutorPool) -> None:
    """issue 33: TVM's float32 -> float8_e4m3fn -> float32 turns 0.0 and 0.0029296875 into 0.0078125 (PyTorch and
    torch_xla: 0.0 and 0.00390625) and check reported nothing: 100.0 ties to 96, and the arithmetic bound allowed 3x
    that 4.0 everywhere. Held to half an ULP, TVM's float8 -> float32 cast is the bug (its float32 -> float8 flushes
    0.0029 to 0, a coverage note at most, and yields to it); eager and torch_xla stay clean."""
    case = load_case(FIXTURES / "tvm-fp8-round-trip-zero-issue33.json")
    names = ["torch/eager", "xla/native", "tvm/default", "tvm/decompose"]
    result = Checker(pool).check(case, names)
    by = {f.executor: f for f in result.findings}
    assert set(by) == {"tvm/default", "tvm/decompose"}, [f.message for f in result.findings]
    for name in ("tvm/default", "tvm/decompose"):
        f = by[name]
        assert (f.kind, f.oracle, f.error_class, f.node, f.dtypes) == (
            "backend-bug", "error-bound", "bound", "dq", ["float8_e4m3fn->float32"]), f.message
    (tvm,) = result.outcomes["tvm/default"]
    assert same(tvm.outputs[0][:2], [2.0**-7, 2.0**-7])
    sets = input_values(case, 0)
    exact, ideal = evaluate(case.graph, sets, rounded=False)["dq"], ideal_values(case.graph, sets)["dq"]
    assert error_stats(tvm.outputs[0], exact, ideal, "float32").ratio < 1.0  # what the arithmetic bound said


def test_regression_16_bit_and_fp8_round_trips_stay_clean_on_eager_and_xla(pool: ExecutorPool) -> None:
    """Held to correct rounding, PyTorch's and torch_xla's casts float32 -> float16 / bfloat16 / float8_e5m2 (and
    back, and float16 -> bfloat16) raise no alarm on normal, subnormal and out-of-range data."""
    x = np.concatenate([np.random.default_rng(4).normal(0, s, 32) for s in (1.0, 1e-5, 3e4, 1e-40)])
    nodes = [Node("h", "astype", ("x",), {"dtype": "float16"}), Node("hb", "astype", ("h",), {"dtype": "float32"}),
             Node("b", "astype", ("x",), {"dtype": "bfloat16"}), Node("bb", "astype", ("b",), {"dtype": "float32"}),
             Node("e", "astype", ("x",), {"dtype": E5}), Node("eb", "astype", ("e",), {"dtype": "float32"}),
             Node("hbf", "astype", ("h",), {"dtype": "bfloat16"})]
    graph = Graph((Input("x", (x.size,), "float32", init={"values": x.tolist()}),), tuple(nodes),
                  ("hb", "bb", "eb", "hbf", "h", "b"))
    result = Checker(pool).check(Case(graph), ["torch/eager", "xla/native"])
    assert result.findings == [], [f.message for f in result.findings]
    assert all(j.stats.ratio == 0.0 for js in result.judgements.values() for j in js)
    # a float64 value just past a 16-bit tie: PyTorch's CPU cast (and torch_xla's) rounds it through float32, onto
    # the tie and then to even, one ULP from the correctly rounded value: PyTorch's cast semantics, allowed too
    ties = [1.0 + 2.0**-11 + 2.0**-40, 1.0 + 2.0**-8 + 2.0**-40, 0.5, 3.0]
    assert [float(r[0]) for r in cast_results(np.array(ties[:1]), "float16")] == [1.0 + 2.0**-10, 1.0]
    wide = Graph((Input("x", (4,), "float64", init={"values": ties}),),
                 (Node("h", "astype", ("x",), {"dtype": "float16"}), Node("b", "astype", ("x",), {"dtype": "bfloat16"})),
                 ("h", "b"))
    result = Checker(pool).check(Case(wide), ["torch/eager", "xla/native", "tvm/default"])
    assert result.findings == [], [f.message for f in result.findings]


def test_regression_the_scripts_of_a_cast_finding_hold_the_cast_to_correct_rounding(pool: ExecutorPool,
                                                                                    tmp_path) -> None:
    """issue 33: the record of TVM's fp8 round trip must be confirmed by a script exiting 1 in a fresh process. Both
    scripts restate the cast rule: the short one rounds its float64 answer through the casts and allows nothing else,
    the full one pastes rounding_ratio. The short one exits 1 and is the record's repro; on values TVM casts right it
    exits 0, as check reports nothing there."""
    from fuzzer.artifacts import confirm_scripts, run_script, write_finding

    case = load_case(FIXTURES / "tvm-fp8-round-trip-zero-issue33.json")
    (f,) = Checker(pool).check(case, ["torch/eager", "tvm/default"]).findings
    art = write_finding(tmp_path / "bug", case, f, {}, "test")
    assert "SINGLE_ROUNDING = ['dq']" in art.repro_full.read_text()
    assert "astype(ml_dtypes.float8_e4m3fn)" in art.repro.read_text()
    shown = confirm_scripts(art)
    assert shown.script == art.repro and shown.note.startswith("repro.py reproduces it"), shown.note
    status, tail = run_script(art.repro_full)
    assert status == 1 and "a cast off by more than half an ULP" in tail, tail
    status, tail = run_script(art.repro)  # triage33 beacf72a2b: it printed "7.45e+291x the allowed error"
    assert status == 1 and "value(s) not the correctly rounded cast" in tail and "x the allowed error" not in tail, tail
    right = Case(Graph((Input("x", (6,), "float32", init={"values": [0.5, 0.3, 3.0, -0.25, 100.0, 448.0]}),),
                       case.graph.nodes, case.graph.outputs))
    assert Checker(pool).check(right, ["torch/eager", "tvm/default"]).findings == []
    clean = write_finding(tmp_path / "clean", right, f, {}, "test")
    assert run_script(clean.repro)[0] == 0


def test_a_node_whose_error_flushing_explains_yields_to_a_later_node_with_an_error_of_its_own() -> None:
    """issue 33: TVM's float32 -> e4m3fn flushes 0.0029 to 0 (flushing explains it), then its e4m3fn -> float32 turns
    0 into 0.0078125: the later cast is the bug to file; a flushed node alone is still named (the underflow note)."""
    from oracles.bounds import ErrorStats
    from oracles.error_bounds import at_fault

    flushed, wrong, fine = (ErrorStats(0.004, 2.0, 4.0, 1, 0), ErrorStats(0.008, 4.0, 8.0, 0, 0),
                            ErrorStats(0.0, 0.0, 0.0, 0, 0))
    assert at_fault([("q", flushed), ("dq", wrong)], flushed={"q"}) == "dq"
    assert at_fault([("q", flushed), ("dq", wrong)]) == "q"
    assert at_fault([("q", flushed), ("dq", fine)], flushed={"q"}) == "q"


def test_regression_an_op_reading_a_float8_operand_wrong_is_the_conversions_record() -> None:
    """triage27 b1e2721d62: TVM's scaled_mm lowers to a float8 -> float32 conversion and a matmul; the conversion
    turns 0 into 0.0078125, and scaled_mm was named at 4e37x. The op's float8 operands are converted alone on the
    backend first: a wrong conversion is the astype's record, with the value it gets wrong."""
    from fuzzer.check import Checker
    from fuzzer.ir import load_case
    from fuzzer.isolation import ExecutorPool

    case = load_case(FIXTURES / "tvm-scaled-mm-fp8-decode-b1e2721d62-triage27.json")
    with ExecutorPool(["torch/eager", "tvm/default"]) as pool:
        result = Checker(pool).check(case, ["tvm/default"])
    (f,) = [f for f in result.findings if f.executor == "tvm/default" and f.oracle == "error-bound"]
    assert f.ops == ["astype"] and f.dtypes[0].endswith("->float32") and "conversion alone gives" in f.message
