"""IR: JSON round trip, content hash, validation errors that name the culprit, CLI exit status 2."""

from __future__ import annotations

import subprocess
import sys

import pytest
from op_examples import example

from fuzzer.ir import IRError, case_from_json, case_to_json, infer, load_case, save_case
from fuzzer.ops import OPS


@pytest.mark.parametrize("op", sorted(OPS))
def test_every_op_example_round_trips_through_json(op: str, tmp_path) -> None:
    case = example(op)
    path = save_case(case, tmp_path / "c.json")
    again = load_case(path)
    assert again == case and again.id == case.id
    assert path.read_bytes() == save_case(again, tmp_path / "d.json").read_bytes()


def test_id_ignores_meta_but_not_values() -> None:
    case = example("add")
    body = case_to_json(case)
    body["meta"] = {"note": "x"}
    assert case_from_json(body).id == case.id
    body["inputs"][0]["init"] = {"dist": "constant", "value": 2.0}
    assert case_from_json(body).id != case.id


def _broken(mutate) -> dict:
    body = case_to_json(example("layer_norm"))
    mutate(body)
    return body


@pytest.mark.parametrize("mutate, needle", [
    (lambda b: b["nodes"][0].update(op="frobnicate"), "node 'out' (frobnicate): unknown op"),
    (lambda b: b["nodes"][0]["attrs"].update(normalized_shape=[7]), "node 'out' (layer_norm): normalized_shape [7]"),
    (lambda b: b["nodes"][0].update(inputs=["x", "nope"]), "operand 'nope' is not defined"),
    (lambda b: b["inputs"][0].update(dtype="float8"), "input 'x': unknown dtype 'float8'"),
    (lambda b: b["inputs"][1].update(dtype="bfloat16"), "parameters disagree in dtype"),
    (lambda b: b["nodes"][0]["attrs"].update(bogus=1), "unknown attribute(s) bogus"),
    (lambda b: b.update(outputs=["zz"]), "output 'zz' is not a value"),
    (lambda b: b["inputs"][0].update(init={"dist": "cauchy"}), "unknown distribution 'cauchy'"),
])
def test_bad_graphs_give_one_line_errors_naming_the_culprit(mutate, needle: str) -> None:
    with pytest.raises(IRError) as info:
        case_from_json(_broken(mutate))
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_seed_cases_type_check(seeds_dir) -> None:
    tvm = infer(load_case(seeds_dir / "tvm-decompose-layernorm-fp16.json").graph)
    assert tvm.values["y"].dtype == "float16" and not tvm.chain_breaks()
    xla = infer(load_case(seeds_dir / "xla-bf16-schedule-upcast.json").graph)
    assert xla.values["noisy"].dtype == "float32"
    brk = xla.chain_breaks()["out"]
    assert (brk.activation_dtype, brk.param_dtype) == ("float32", "bfloat16")


@pytest.mark.parametrize("text, needle", [
    ("{not json", "malformed JSON at line 1"),
    ('{"inputs": [], "nodes": [{"id": "a", "op": "exp", "inputs": ["q"]}], "outputs": ["a"]}', "node 'a' (exp)"),
])
def test_check_cli_exits_2_with_one_line_error(tmp_path, text: str, needle: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "fuzzer.cli", "check", str(path)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr


def _big(n: int) -> dict:
    return {"inputs": [{"name": "x", "shape": [n], "dtype": "float32", "init": {"dist": "normal", "seed": 0}}],
            "nodes": [{"id": "y", "op": "exp", "inputs": ["x"]}], "outputs": ["y"]}


def test_case_size_cap_is_checked_before_allocation_and_configurable(monkeypatch) -> None:
    monkeypatch.delenv("PRECFUZZ_MAX_CASE_BYTES", raising=False)
    case_from_json(_big(4_000_000))  # 2 values x 4M float64 = 61 MiB: under the default cap
    with pytest.raises(IRError, match="more than the 512 MiB cap"):
        case_from_json({**_big(4_000_000), "input_sets": [{}] * 9})
    monkeypatch.setenv("PRECFUZZ_MAX_CASE_BYTES", "1e7")
    with pytest.raises(IRError, match="PRECFUZZ_MAX_CASE_BYTES"):
        case_from_json(_big(4_000_000))
    monkeypatch.setenv("PRECFUZZ_MAX_CASE_BYTES", "1e10")
    case_from_json({**_big(4_000_000), "input_sets": [{}] * 9})
    monkeypatch.setenv("PRECFUZZ_MAX_CASE_BYTES", "lots")
    with pytest.raises(IRError, match="not a positive number of bytes"):
        case_from_json(_big(4))


def test_every_attribute_of_every_op_has_a_type() -> None:
    for spec in OPS.values():
        assert set(spec.attr_types) == set(spec.attrs), spec.name
        for key, default in spec.attrs.items():
            assert default is None or spec.attr_types[key].accepts(default), (spec.name, key)


def test_largest_generated_cases_are_far_below_the_caps() -> None:
    from fuzzer.ir import check_size
    from fuzzer.limits import DEFAULT_MAX_CASE_BYTES
    from generators.graphs import generate_case

    for index in range(300):
        case = generate_case(11, index)
        check_size(case.graph, infer(case.graph), 8 * len(case.input_sets))  # 8x the input sets still fits
    assert DEFAULT_MAX_CASE_BYTES <= 2**30


def test_a_graphs_canonical_text_is_its_json_made_once_and_not_pickled() -> None:
    """Issue 22: a real model's graph holds its weights, and a check keyed it by canonical JSON ~30 times (half the
    reference's time on mobilenet_v3_small). Graph.text is that JSON, made once per graph, left out of pickles."""
    import pickle

    from fuzzer.ir import canonical, graph_to_json

    graph = example("conv2d").graph
    assert graph.text == canonical(graph_to_json(graph)) and graph.text is graph.text
    back = pickle.loads(pickle.dumps(graph))
    assert back == graph and "text" not in back.__dict__ and back.text == graph.text


def test_regression_a_widened_bf16_min_fill_is_a_valid_graph() -> None:
    """triage27 internal error: the float32 model of a bfloat16 attention mask full(value="min") keeps the mask's
    number, -3.39e38, and the interpreter's JSON round trip refused it (values were capped at 2**63, for ints). A
    float fill may be as large as its format's limit; an int tensor still cannot hold a number beyond int64."""
    from fuzzer.dtypes import LOW_PRECISION
    from fuzzer.ir import IRError, Graph, Node, graph_from_json, graph_to_json, infer, redeclare

    g = Graph((), (Node("mask_fill", "full", (), {"shape": [2, 2], "value": "min", "dtype": "bfloat16"}),), ("mask_fill",))
    wide = redeclare(g, LOW_PRECISION, "float32")
    back = graph_from_json(graph_to_json(wide), trusted=True)
    assert back.nodes[0].attrs["value"] < -3.3e38 and back.nodes[0].attrs["dtype"] == "float32"
    bad = Graph((), (Node("f", "full", (), {"shape": [2], "value": -3.4e38, "dtype": "int64"}),), ("f",))
    with pytest.raises(IRError, match="cannot hold"):
        infer(bad)
