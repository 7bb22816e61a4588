"""Error classes: what a backend's exception message says (dtype mismatch, compiler error, unsupported, ...)."""

from __future__ import annotations

import re

from fuzzer.outcome import Outcome

from .vocabulary import ErrorClass

# (class, pattern over "<error type>: <message>"), first match wins. Backends word these differently.
ERROR_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((c, re.compile(p, re.IGNORECASE)) for c, p in (
    # a device compiler rejecting what the frontend let through (e.g. XLA's HLO verifier on mixed precisions)
    (ErrorClass.COMPILER_ERROR, r"hlo verifier|neuronx-cc|NCC_[A-Z]+\d+|compil(e|ation|er) (error|fail)|failed compilation"
                       r"|HloModule|XLA compilation|tvm\.error|TVMError"),
    (ErrorClass.DTYPE_MISMATCH, r"type \(.*\) and .* type \(.*\) should be the same|should be the same (type|dtype)"
                       r"|expected .*(same dtype|same type|scalar type)|must have the same (dtype|type|scalar type)"
                       r"|dtype mismatch|mixed dtype|found dtype \w+ but expected|expected both .* to have the same"
                       r"|type mismatch|promot\w* .* not allowed"),
    (ErrorClass.UNSUPPORTED, r"^NotImplementedError|not implemented for|not supported|unsupported|no (lowering|kernel)"),
))


def classify_error(outcome: Outcome) -> str:
    """dtype-mismatch | unsupported | compiler-error | runtime-error (errors), or the status itself."""
    if outcome.status in ("ok", "unsupported", "crash", "timeout"):
        return outcome.status
    text = f"{outcome.error_type or ''}: {outcome.message or ''}"
    for cls, pattern in ERROR_CLASSES:
        if pattern.search(text):
            return cls
    return ErrorClass.COMPILER_ERROR if outcome.stage == "compile" else ErrorClass.RUNTIME_ERROR


_VOLATILE = re.compile(r"0x[0-9a-f]+|\d+(\.\d+)?|'[^']*'|\"[^\"]*\"|\[[^\]]*\]|\([^)]*\)|/[\w./-]+")
_KEY_WORDS = 10


def message_key(message: str | None) -> str:
    """The error message as a class: its first line lower-cased, numbers, quoted names, shapes, argument lists and
    paths dropped, the first words kept ("unexpected floating scalartype in at::autocast::prioritize")."""
    lines = [ln for ln in (message or "").strip().splitlines() if ln.strip()]
    line = (lines[-1] if lines and lines[0].startswith("Traceback") else lines[0]) if lines else ""
    line = line.rsplit("Check failed:", 1)[-1] if "Check failed:" in line else line
    words = re.sub(r"[^a-z:_ ]+", " ", _VOLATILE.sub(" ", line.lower())).split()
    return " ".join(words[:_KEY_WORDS])
