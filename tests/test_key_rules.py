"""The bug key's grouping rules (oracles.bugs.KEY_RULES): one example finding per rule, each showing the rule merges
what the default parts would split; a rule added without an example fails here."""

from __future__ import annotations

import pytest

from oracles.bugs import KEY_RULES, bug_key, key_parts
from oracles.findings import Finding


def _bound(executor: str, op: str, dtypes: str, **details: object) -> Finding:
    return Finding("error-bound", executor, [op], [dtypes], "bound", "m", details=dict(details))


# rule name -> (example finding, pipeline_specific, a finding of the same cause the rule merges it with)
EXAMPLES: dict[str, tuple[Finding, bool | None, Finding]] = {
    "importer-dtype-policy": (
        Finding("dtype-divergence", "tvm/frontend", ["linear"], ["float16"], "dtype", "m"), None,
        Finding("dtype-divergence", "tvm/frontend", ["conv2d"], ["float16"], "dtype", "m")),
    "16-bit-sum": (_bound("xla/native", "sum", "bfloat16->bfloat16"), None,
                   _bound("xla/native", "adaptive_avg_pool2d", "float16->float16")),
    "xla-16-bit-sum-backward": (
        Finding("error-bound", "xla/native", ["conv2d"], ["bfloat16,bfloat16,bfloat16->bfloat16"], "grad-bound", "m",
                details={"grad": "b", "broadcast_sum": True, "operand": "b"}), None,
        _bound("xla/native", "mean", "float16->float16")),
    "torch-16-bit-sum-backward": (
        Finding("error-bound", "torch/eager", ["layer_norm"], ["float16,float16,float16->float16"], "grad-bound", "m",
                details={"grad": "beta", "broadcast_sum": True, "operand": "beta"}), None,
        Finding("error-bound", "torch/eager", ["layer_norm"], ["bfloat16,bfloat16,bfloat16->bfloat16"], "grad-bound",
                "m", details={"grad": "gamma", "broadcast_sum": True, "operand": "gamma"})),
    "tvm-training-mean": (_bound("tvm/train", "layer_norm", "float16->float16"), True,
                          _bound("tvm/default", "mean", "float16->float16")),
    "mixed-16-bit": (_bound("xla/native", "add", "float16,bfloat16->float32"), None,
                     _bound("xla/native", "div", "bfloat16,float16->float32")),
    "tvm-float8-decode": (_bound("tvm/default", "astype", "float8_e5m2->bfloat16"), None,
                          Finding("error-bound", "tvm/default", ["astype"], ["float8_e4m3fn->float32"],
                                  "dtype-semantics", "m")),
    "tvm-float8-encode": (_bound("tvm/default", "astype", "bfloat16->float8_e4m3fn"), None,
                          Finding("error-bound", "tvm/default", ["astype"], ["float32->float8_e4m3fn"],
                                  "dtype-semantics", "m")),
    "missing-dtype-check": (
        Finding("silent-downcast", "xla/bf16-model", ["linear"], ["float16,bfloat16,bfloat16"], "downcast", "m"), None,
        Finding("silent-downcast", "xla/bf16-model", ["conv2d"], ["float16,bfloat16,bfloat16"], "downcast", "m")),
    "tvm-gradient-raises": (
        Finding("status-divergence", "tvm/train", ["mul", "sum"], [], "compile-error", "m",
                details={"error_key": "only tensors of floating point dtype can require gradients"}), True,
        Finding("status-divergence", "tvm/train", ["rms_norm"], [], "compile-error", "m",
                details={"error_key": "only tensors of floating point dtype can require gradients"})),
    "coverage-gap": (
        Finding("coverage", "tvm/default", ["rms_norm"], ["bfloat16"], "unsupported", "m", kind="unsupported"), None,
        Finding("coverage", "tvm/default", ["group_norm"], ["bfloat16"], "unsupported", "m", kind="unsupported")),
    "xla-one-pass-variance": (_bound("xla/native", "instance_norm", "float32->float32"), None,
                              _bound("xla/native", "layer_norm", "float16->float16")),
    "tvm-one-pass-variance": (_bound("tvm/default", "group_norm", "float32,float32,float32->float32"), None,
                              _bound("tvm/default", "instance_norm", "float16,float16,float16->float16")),
    "tvm-one-formula": (_bound("tvm/default", "tanh", "float32->float32"), None,
                        _bound("tvm/decompose", "tanh", "float16->float16")),
    "torch-autocast-scaled-mm": (
        _bound("torch/autocast", "scaled_mm", "float8_e5m2,float8_e4m3fn,float32,float32->float32"), None,
        Finding("effective-precision", "torch/autocast", ["scaled_mm"], ["float32", "bfloat16"],
                "float32-carries-bfloat16", "m")),
}


def test_every_rule_has_an_example_a_provenance_and_a_name_of_its_own() -> None:
    names = [r.name for r in KEY_RULES]
    assert len(set(names)) == len(names)
    assert set(names) == set(EXAMPLES), "a rule without an example here (or an example of no rule)"
    assert all(r.taught_by.strip() and r.sets for r in KEY_RULES)


@pytest.mark.parametrize("rule", KEY_RULES, ids=[r.name for r in KEY_RULES])
def test_the_rule_applies_to_its_example_and_merges_what_the_parts_alone_split(rule) -> None:
    example, specific, sibling = EXAMPLES[rule.name]
    without = tuple(r for r in KEY_RULES if r is not rule)
    assert rule.applies(example, key_parts(example, specific, KEY_RULES[:KEY_RULES.index(rule)]), specific)
    assert bug_key(example, specific) == bug_key(sibling, specific)
    assert (key_parts(example, specific, without).text() != key_parts(sibling, specific, without).text()), \
        "the two findings have one key without the rule too: the example does not show what the rule does"


def test_regression_a_refusal_that_names_its_op_is_a_record_of_its_own() -> None:
    """sample29 #2: TVM's "layer_norm: only support float32 and float16" was filed in the bfloat16 group_norm
    coverage record (the rule wildcarded the op of every refusal); an op's own legality check is its own record."""
    def gap(op: str, named: bool) -> Finding:
        return Finding("coverage", "tvm/default", [op], ["bfloat16"], "unsupported", "m", kind="unsupported",
                       details={"op_named": named})

    assert bug_key(gap("layer_norm", True)) != bug_key(gap("group_norm", True))
    assert bug_key(gap("layer_norm", False)) == bug_key(gap("group_norm", False))


def test_regression_a_record_of_every_dtype_does_not_title_one() -> None:
    """triage29 b2ec291c20: TVM's causal mask as 0 is one record across dtypes (tvm-one-formula), titled float16."""
    from oracles.bugs import title

    text = title(_bound("tvm/default", "tanh", "float16->float16"), ["tvm/default"])
    assert "float16" not in text and "(any dtype) tanh" in text, text
    assert "float16 sum" in title(_bound("tvm/default", "sum", "float16->float16"))
    own = _bound("tvm/default", "tanh", "float16->float16", wrong_in_float32=False)  # triage30 b1ca6657d9: right in
    assert bug_key(own) != bug_key(_bound("tvm/default", "tanh", "float32->float32"))  # float32, the float16 record
    assert "float16 tanh" in title(own, ["tvm/default"])


def test_regression_a_cast_is_titled_by_how_far_off_it_is_not_by_a_ratio_to_an_exact_bound() -> None:
    """triage30 b1e2721d62: TVM's float8 -> float32 conversion titled "1.12e+43x less accurate" (a cast's bound is 0)."""
    from oracles.bugs import title

    f = Finding("error-bound", "tvm/default", ["astype"], ["float8_e4m3fn->float32"], "bound", "m", ratio=1.12e43,
                max_ulp=1.5e6)
    text = title(f, ["tvm/default"])
    assert "astype returns values up to 1.5e+06 ULP off where the correctly rounded cast is exact" in text, text
    assert "e+43" not in text
    nan = Finding("error-bound", "tvm/default", ["astype"], ["float8_e4m3fn->float32"], "nonfinite", "m")
    assert "astype gets inf/nan wrong" in title(nan, ["tvm/default"])  # triage31 b8126a7ee2: NaN read as -480


def test_regression_a_precision_hazard_of_an_inputs_rounding_is_titled_with_the_input_and_its_fix() -> None:
    """hazards30 b93a9d81db: the float16 rounding of input x lost a group_norm's output; the title said "float16
    group_norm ...; keep it in float32", which loses as much. It names the input and the message's fix."""
    from oracles.bugs import title

    f = Finding("model-hazard", "torch/eager", ["group_norm"], ["float16"], "precision", "m", kind="model-hazard",
                details={"culprit": "x", "culprit_is_input": True, "fix": "pass `x` as float32", "loss": 0.27,
                         "policy": "declared", "policy_words": "the declared dtypes"})
    text = title(f)
    assert text.startswith("Precision hazard: the float16 rounding of input `x` loses") and text.endswith(
        "; pass `x` as float32"), text


def test_regression_model_hazards_of_opposite_directions_are_two_records() -> None:
    """sample30 #1: conv2d's float16 activation beside float32 parameters (fix: x.to(float32)) was filed in the record
    of a float32 activation beside float16 parameters (fix: cast down)."""
    def hazard(act: str, param: str) -> Finding:
        return Finding("model-hazard", "torch/eager", ["conv2d"], [act, param], "raised", "m", kind="model-hazard")

    assert bug_key(hazard("float16", "float32")) != bug_key(hazard("float32", "float16"))
    assert bug_key(hazard("float16", "float32")) == bug_key(hazard("float16", "float32"))


def test_regression_tvms_float8_encode_and_decode_are_two_records() -> None:
    """sample30 #2, #23: TVM's bfloat16 -> float8 cast wrapping past the range was filed in the record of float8 ->
    float32 reading 0 as 0.0078125 (b1e2721d62): two defects of one conversion code, two records."""
    encode = Finding("error-bound", "tvm/default", ["astype"], ["bfloat16->float8_e4m3fn"], "dtype-semantics", "m")
    decode = _bound("tvm/default", "astype", "float8_e4m3fn->float32")
    assert bug_key(encode) != bug_key(decode)
