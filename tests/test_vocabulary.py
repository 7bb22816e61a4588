"""The vocabulary (oracles/vocabulary.py) is the one place its words are spelled (issue 34)."""

from __future__ import annotations

import io
import json
import tokenize
from pathlib import Path

from oracles.vocabulary import ErrorClass, Kind, Oracle, Reaction

ROOT = Path(__file__).resolve().parent.parent
# words other vocabularies share (an outcome's status "crash", "timeout", "unsupported"; the generators' family
# "coverage"; plain English "bound", "precision", "dtype", "shape") are left to their context
SHARED = {"crash", "timeout", "coverage", "unsupported", "bound", "nonfinite", "underflow", "precision", "raised",
          "downcast", "dtype", "shape"}
WORDS = {f'"{w.value}"' for enum in (Kind, Oracle, ErrorClass, Reaction) for w in enum if w.value not in SHARED}


def test_no_vocabulary_word_is_a_string_literal_outside_the_vocabulary() -> None:
    """Every kind, oracle and distinctive error class in code is its enum member, never the literal string."""
    found = []
    for path in sorted(p for d in ("fuzzer", "oracles", "generators") for p in (ROOT / d).rglob("*.py")):
        if path.name == "vocabulary.py":
            continue
        for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
            if tok.type == tokenize.STRING and tok.string in WORDS:
                found.append(f"{path.relative_to(ROOT)}:{tok.start[0]}: {tok.string}")
    assert not found, "\n".join(found)


def test_a_word_is_its_string_in_every_use() -> None:
    """A member prints, formats, reprs and serializes as its value, so records and scripts read as before."""
    w = Kind.MODEL_HAZARD
    assert (str(w), f"{w}", f"{w:>13}", repr(w), json.dumps({w: [w]})) == (
        "model-hazard", "model-hazard", " model-hazard", "'model-hazard'", '{"model-hazard": ["model-hazard"]}')
    assert w == "model-hazard" and {"model-hazard": 1}[w] == 1 and hash(w) == hash("model-hazard")
