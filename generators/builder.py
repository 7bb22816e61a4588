"""GraphBuilder: appends inputs and nodes, typing each node with the op table and tracking value intervals."""

from __future__ import annotations

import builtins
import keyword
import math
from dataclasses import dataclass, replace
from typing import Any

from fuzzer.ir import Case, Graph, Input, Node, canonical
from fuzzer.ops import OPS, ValueInfo, elementwise, linalg, norms, reductions

from .distributions import Spec, specs_interval
from .draw import DrawSource
from .ranges import RULES, Interval, is_finite, magnitude, square

# Value names become Python locals in the rendered reference and torch functions; a value named like an op's
# reference function (`conv = conv(...)`) or a module-level helper breaks them, so generated names avoid these.
RESERVED = (set(keyword.kwlist) | set(dir(builtins))
            | {n for m in (elementwise, linalg, norms, reductions) for n in dir(m)}
            | {"rnd", "round_to", "rounded", "inputs", "reference", "graph", "torch", "F", "device", "np", "math"})


@dataclass(frozen=True)
class Val:
    """A graph value as the generators see it: name, static type and an interval holding its fp64 values."""

    name: str
    info: ValueInfo
    interval: Interval

    @property
    def shape(self) -> tuple[int, ...]:
        """Static shape ([] for 0-dim tensors and Python scalars)."""
        return self.info.shape

    @property
    def dtype(self) -> str:
        """Static dtype."""
        return self.info.dtype

    @property
    def rank(self) -> int:
        """Number of dims."""
        return len(self.info.shape)

    @property
    def numel(self) -> int:
        """Number of elements."""
        return math.prod(self.info.shape)

    @property
    def lo(self) -> float:
        """Lower end of the value interval."""
        return self.interval[0]

    @property
    def hi(self) -> float:
        """Upper end of the value interval."""
        return self.interval[1]

    @property
    def bound(self) -> float:
        """Largest absolute value."""
        return magnitude(self.interval)


class GraphBuilder:
    """Accumulates one case: inputs with a spec per input set, typed nodes, outputs."""

    def __init__(self, draw: DrawSource, n_sets: int) -> None:
        self.draw = draw
        self.n_sets = n_sets
        self.inputs: list[Input] = []
        self.overrides: list[dict[str, Spec]] = [{} for _ in range(n_sets)]
        self.nodes: list[Node] = []
        self.values: dict[str, Val] = {}
        self.notes: dict[str, Any] = {}  # what the generators chose, for meta
        self.infinite_ok: set[str] = set()  # values that may hold -inf by design (attention masks and masked scores)
        self.grads: set[str] = set()  # inputs whose gradients a training case checks (generators/training.py)

    def fresh(self, stem: str) -> str:
        """An unused value name starting with stem."""
        if stem not in self.values and stem not in RESERVED:
            return stem
        k = 1
        while f"{stem}{k}" in self.values or f"{stem}{k}" in RESERVED:
            k += 1
        return f"{stem}{k}"

    def input(self, stem: str, shape: tuple[int, ...], dtype: str, specs: list[Spec],
              role: str = "input", kind: str = "tensor") -> Val:
        """A new graph input; specs holds its value spec in each input set (the first is its init)."""
        assert len(specs) == self.n_sets
        name = self.fresh(stem)
        inp = Input(name, tuple(shape), dtype, role, kind, specs[0])
        for k, spec in enumerate(specs[1:], 1):
            if spec != specs[0]:
                self.overrides[k][name] = spec
        value_dtype = dtype if kind == "tensor" else ("float64" if dtype.startswith("float") else "int64")
        val = Val(name, inp.info(), specs_interval(specs, value_dtype))
        self.inputs.append(inp)
        self.values[name] = val
        return val

    def op(self, op: str, operands: list[Any], stem: str | None = None, **attrs: Any) -> Val:
        """Append a node; raises IRError if the generators broke an op's constraints."""
        spec = OPS[op]
        while operands and operands[-1] is None and len(operands) > spec.required:
            operands = operands[:-1]
        infos: list[ValueInfo | None] = []
        ivs: list[Interval | None] = []
        refs: list[str | float | int | None] = []
        for o in operands:
            if o is None:
                infos.append(None)
                ivs.append(None)
                refs.append(None)
            elif isinstance(o, Val):
                infos.append(o.info)
                ivs.append(o.interval)
                refs.append(o.name)
            else:
                infos.append(ValueInfo((), "float64" if isinstance(o, float) else "int64", "scalar"))
                ivs.append((float(o), float(o)))
                refs.append(o)
        infos += [None] * (len(spec.operands) - len(infos))
        full = {**spec.attrs, **attrs}
        typed = spec.infer(infos, full)
        interval = RULES[op](ivs + [None] * (len(spec.operands) - len(ivs)), infos, full, typed.value)
        if op == "mul" and len(operands) == 2 and operands[0] is operands[1]:
            interval = square(ivs[0])  # type: ignore[arg-type]
        name = self.fresh(stem or op)
        self.nodes.append(Node(name, op, tuple(refs), dict(attrs)))
        val = Val(name, typed.value, interval)
        self.values[name] = val
        return val

    def param_dtype(self, activation: str, p_same: float = 0.88) -> str:
        """Parameter dtype: mostly the activation's, else another float dtype (a chain break, or mixed fp32 params)."""
        if activation not in ("float16", "bfloat16", "float32") or self.draw.chance(p_same):
            return activation if activation in ("float16", "bfloat16", "float32", "float64") else "float32"
        return self.draw.choice([d for d in ("float32", "bfloat16", "float16") if d != activation])

    def finite(self) -> bool:
        """True when every value interval is finite (the fp64 reference cannot overflow or produce nan), masks aside."""
        return all(is_finite(v.interval) for k, v in self.values.items() if k not in self.infinite_ok)

    def masked(self, val: Val) -> Val:
        """`val` may hold -inf by design (a mask fill and what adds it): finite() does not hold it against the case."""
        self.infinite_ok.add(val.name)
        return val

    def case(self, outputs: list[Val], meta: dict[str, Any]) -> Case:
        """The finished case."""
        names: list[str] = []
        for out in outputs:
            if out.name not in names and not out.info.is_scalar:
                names.append(out.name)
        inputs = tuple(replace(i, grad=True) if i.name in self.grads else i for i in self.inputs)
        graph = Graph(inputs, tuple(self.nodes), tuple(names))
        sets: dict[str, dict[str, Spec]] = {}
        for o in self.overrides:  # an input set that repeats another's values is no test of its own
            sets.setdefault(canonical(o), dict(o))
        return Case(graph, tuple(sets.values()), dict(meta))
