"""The one interface of judging (issue 34): the checker runs backends and judges nothing; every oracle is a step."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from oracles import judging

ROOT = Path(__file__).resolve().parent.parent
DETECTORS = ("attribution", "crashes", "gradients", "precision_hazards", "semantics", "training_hazards",
             "error_bounds", "cast_semantics", "bugs")


def test_every_step_of_judging_has_the_one_signature_and_a_docstring() -> None:
    """Each step takes the Judging and the findings so far and returns findings; the order is one table."""
    names = [name for name, _ in judging.STEPS]
    assert len(names) == len(set(names))
    for _, step in judging.STEPS:
        params = list(inspect.signature(step).parameters)
        assert params == ["j", "found"], step.__name__
        assert step.__doc__ and step.__doc__.split(":")[0] in ("Detector", "Review", "Detector and review"), step


def test_the_checker_imports_no_oracle_that_judges() -> None:
    """fuzzer/check.py reaches the detectors only through oracles.judging (a rule added to an oracle never touches it)."""
    tree = ast.parse((ROOT / "fuzzer" / "check.py").read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("oracles"):
            imported |= {node.module.split(".", 1)[-1]} | {a.name for a in node.names}
    assert not imported & set(DETECTORS), imported & set(DETECTORS)


def test_refused_policies_names_the_executor_and_the_reason_the_ir_gives() -> None:
    """A policy whose program the IR rejects is left out with the IR's one-line reason; others are kept."""
    from fuzzer.ir import Graph, Input, IRError, Node

    ok = Graph((Input("x", (2,), "float32"),), (Node("y", "relu", ("x",)),), ("y",))

    def programs(name: str) -> tuple[Graph, Graph | None]:
        if name == "bad":
            raise IRError("node y: torch._scaled_mm takes float32 scales")
        return ok, None

    assert judging.refused_policies(["good", "bad"], programs) == {"bad": "node y: torch._scaled_mm takes float32 scales"}
