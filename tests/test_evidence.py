"""Typed evidence (oracles.evidence): every key a detector writes or a reader reads is in the schema, a finding's
record comes back whole from disk, and evidence that misfits the schema marks the record damaged."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest

from fuzzer.campaign.store import dumps, valid_record
from oracles.evidence import KEYS, EvidenceError, read
from oracles.findings import Finding

ROOT = Path(__file__).resolve().parent.parent


def _dict_keys(node: ast.AST) -> list[str]:
    """String keys of a dict literal, through `**` spreads and conditional expressions."""
    if isinstance(node, ast.Dict):
        out = []
        for k, v in zip(node.keys, node.values):
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                out.append(k.value)
            elif k is None:
                out += _dict_keys(v)
        return out
    if isinstance(node, ast.IfExp):
        return _dict_keys(node.body) + _dict_keys(node.orelse)
    return []


def _is_details(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "details") or (isinstance(node, ast.Name)
                                                                           and node.id == "details")


def used_keys() -> dict[str, set[str]]:
    """Evidence key -> the source files that write it (details=..., details = {...}) or read it (details[...],
    details.get(...))."""
    keys: dict[str, set[str]] = {}
    for folder in ("fuzzer", "oracles", "bench"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                found: list[str] = []
                if isinstance(node, ast.keyword) and node.arg == "details":
                    found = _dict_keys(node.value)
                elif isinstance(node, ast.Assign) and any(_is_details(t) for t in node.targets):
                    found = _dict_keys(node.value)
                elif isinstance(node, ast.Subscript) and _is_details(node.value) and isinstance(node.slice, ast.Constant):
                    found = [node.slice.value]
                elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                      and _is_details(node.func.value) and node.args and isinstance(node.args[0], ast.Constant)):
                    found = [node.args[0].value]
                for k in found:
                    keys.setdefault(k, set()).add(str(path.relative_to(ROOT)))
    return keys


def test_every_evidence_key_the_code_writes_or_reads_is_in_the_schema() -> None:
    used = used_keys()
    assert len(used) > 40  # the scan sees the detectors
    missing = {k: sorted(v) for k, v in used.items() if k not in KEYS}
    assert not missing, f"evidence keys outside oracles/evidence.py: {missing}"


def test_a_findings_record_comes_back_whole_through_the_store() -> None:
    """The campaign once saved 13 of the evidence keys: a finding read back lacked what bug keys read (issue 34)."""
    f = Finding("error-bound", "xla/native", ["layer_norm"], ["float16->float16"], "bound", "m", ratio=float("inf"),
                max_ulp=3.5, input_set=2, output="y", node="ln",
                details={"max_abs": np.float64(0.25), "worst_index": (np.int64(3), 1), "localized": True,
                         "error_key": "only support float32", "reactions": {"ran": ["xla/native"]},
                         "row_scale": [0.5, 2.0], "grad": "x", "scale": None})
    back = Finding.from_record(json.loads(dumps(f.record())))
    assert back == Finding(**{**f.__dict__, "details": {**f.details, "max_abs": 0.25, "worst_index": [3, 1]}})
    assert valid_record({**f.record(), "count": 1} | json.loads(dumps({"details": f.record()["details"]})))


@pytest.mark.parametrize("details, says", [({"nonsense": 1}, "not in the schema"), ({"grad": 3}, "'grad'"),
                                           ({"localized": "yes"}, "'localized'"), ({"worst_index": ["a"]}, "worst")])
def test_evidence_that_misfits_the_schema_is_refused_and_its_record_is_damaged(details: dict, says: str) -> None:
    with pytest.raises(EvidenceError, match=says):
        read(details)
    rec = {"signature": "s", "oracle": "error-bound", "executor": "xla/native", "ops": ["add"], "dtypes": ["float16"],
           "count": 1, "details": details}
    assert not valid_record(rec) and valid_record({**rec, "details": {}})
