"""Resource limits on cases read from outside: file size, JSON nesting, graph size and the memory a check needs.

The working-memory cap is what stops a hostile or mistaken shape ([30000, 30000]) before anything is allocated:
a check holds, per input set, every value of the graph in float64 several times over (the reference, three
ideal implementations, the inputs each backend receives), plus the sliding windows the reference convolution
copies. The default keeps one case within a few GiB on a 24 GiB machine with two lanes; raise it with
PRECFUZZ_MAX_CASE_BYTES (bytes, e.g. 2e9) on a larger one.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

ENV_MAX_CASE_BYTES = "PRECFUZZ_MAX_CASE_BYTES"
DEFAULT_MAX_CASE_BYTES = 512 * 2**20  # float64 bytes of every value (and conv window) over all input sets
MAX_VALUE_ELEMENTS = 2**26  # elements of any one value, or of the windows (conv, pool) or attention scores the
# reference forms for one node (one input set): each is float64 work of the reference, with no clock in this process
MAX_REFERENCE_LOOPS = 2**16  # Python-level iterations of one node's reference (adaptive pooling: one per output
# position): at about 10 us each, under a second per evaluation
MAX_REFERENCE_MACS = 2**34  # float64 multiply-adds of the reference over a case's nodes and input sets (matmul,
# linear, convolutions, attention; a training case counts its gradients as twice the forward): at the ~10 GFLOP/s
# of one core's float64 BLAS, a second or two per evaluation
MAX_FILE_BYTES = 64 * 2**20  # a case file
MAX_JSON_DEPTH = 32  # nesting of a case file (inline values of rank 8 need 10)
MAX_NAME_CHARS = 256  # value names
MAX_RANK = 8
MAX_DIM = 2**31 - 1
MAX_NODES = 4096
MAX_INPUTS = 4096
MAX_INPUT_SETS = 64
MAX_INT_LITERAL = 2**31 - 1  # Python-int operands (numpy refuses larger ones next to int32 tensors)
MAX_SEED = 2**63 - 1


class LimitError(ValueError):
    """A case past one of the limits (the message says which, and how to raise it where one can)."""


def max_case_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The working-memory cap: PRECFUZZ_MAX_CASE_BYTES, else the default."""
    raw = (os.environ if environ is None else environ).get(ENV_MAX_CASE_BYTES, "").strip()
    if not raw:
        return DEFAULT_MAX_CASE_BYTES
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value >= 1 or value == float("inf"):
        raise LimitError(f"{ENV_MAX_CASE_BYTES}={raw!r} is not a positive number of bytes")
    return int(value)


def check_json(obj: Any, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise LimitError if a parsed JSON document nests deeper than max_depth or holds text that is not UTF-8."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > max_depth:
                raise LimitError(f"JSON nested deeper than {max_depth} levels")
            children = list(item.items()) if isinstance(item, dict) else [(None, v) for v in item]
            for key, value in children:
                if key is not None:
                    _check_text(key)
                stack.append((value, depth + 1))
        elif isinstance(item, str):
            _check_text(item)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise LimitError(f"string {text[:40]!r} holds a lone surrogate (not encodable as UTF-8)") from None


def working_bytes(elements: int, input_sets: int) -> int:
    """Float64 bytes of `elements` values held for every input set."""
    return 8 * elements * max(1, input_sets)


def check_loops(name: str, loops: int) -> None:
    """Raise LimitError when one node's reference would loop more than MAX_REFERENCE_LOOPS times in Python."""
    if loops > MAX_REFERENCE_LOOPS:
        raise LimitError(f"{name} needs {loops} Python-level steps of the float64 reference, more than the "
                         f"{MAX_REFERENCE_LOOPS} one node may take")


def check_multiply_adds(total: int, largest: tuple[str, int], input_sets: int) -> None:
    """Raise LimitError when the float64 reference would do more than MAX_REFERENCE_MACS multiply-adds."""
    need = total * max(1, input_sets)
    if need > MAX_REFERENCE_MACS:
        name, size = largest
        raise LimitError(f"the float64 reference needs about {need:.3g} multiply-adds ({name} alone {size:.3g}"
                         f"{f' per input set, x {input_sets} sets' if input_sets > 1 else ''}), more than the "
                         f"{MAX_REFERENCE_MACS:.3g} a case may take (each is float64 work of the reference, run "
                         "before any backend's clock)")


def check_working_memory(elements: int, largest: tuple[str, int], input_sets: int,
                         environ: Mapping[str, str] | None = None) -> None:
    """Raise LimitError when one value or the whole case needs more than the caps allow."""
    name, size = largest
    if size > MAX_VALUE_ELEMENTS:
        raise LimitError(f"{name} has {size} elements, more than the {MAX_VALUE_ELEMENTS} one value (or one node's "
                         "windows or scores) may have")
    cap = max_case_bytes(environ)
    need = working_bytes(elements, input_sets)
    if need > cap:
        raise LimitError(f"the case needs about {need / 2**20:.0f} MiB of float64 values ({elements} elements x "
                         f"{input_sets} input set(s)), more than the {cap / 2**20:.0f} MiB cap "
                         f"(set {ENV_MAX_CASE_BYTES} to raise it)")
