"""Relax source for a graph: the module the TVM executors compile is the text their repro scripts contain.

Relax has no implicit type promotion, so every operand is cast (R.op.astype) to the dtype PyTorch would
compute the node in (fuzzer.ir.infer); Python-scalar literals become constants of that dtype, Python-scalar
inputs are 0-dim float64/int64 parameters cast at each use. Chain breaks (PyTorch raises) are bridged by
casting the activation to the compute dtype, as the ideal implementation does. Low-precision conv, linear
and matmul accumulate in float32 (out_dtype, as TVM's PyTorch frontend emits them) and are cast back.
"""

from __future__ import annotations

from typing import Any

from ..dtypes import is_float
from ..identifiers import reserved_names, value_identifiers
from ..ir import Graph, Node, TypedGraph, infer, op_attrs
from ..ops import OPS
from ..ops.base import RelaxCall

_SHORT = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64",
          "bool": "b", "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}


def value_dtype(typed: TypedGraph, value: str) -> str:
    """The Relax dtype a value has in the module (Python scalars are 0-dim float64/int64 tensors)."""
    return typed.values[value].dtype


def bridged(graph: Graph) -> list[str]:
    """Nodes whose chain break (PyTorch raises) the lowering bridges with a cast to the compute dtype."""
    return sorted(infer(graph).chain_breaks())


class _Lowering:
    """Renders nodes as BlockBuilder emits in A-normal form: every call gets its own binding (casts are shared).

    Each op's record renders its own call (OpSpec.relax), through operand(), param(), emit() and dt() here.
    """

    def __init__(self, typed: TypedGraph, names: dict[str, str], dtype_map: str | None = None) -> None:
        self.typed = typed
        self.names = names  # value_identifiers of the graph
        self.dtype_map = dtype_map
        self.lines: list[str] = []
        self.used = set(names.values())
        self.casts: dict[tuple[str, str], str] = {}

    def dt(self, dtype: str) -> str:
        """A dtype as source: a literal, or a lookup in the dtype map (`T["float16"]`) the module is built with."""
        return f"{self.dtype_map}[{dtype!r}]" if self.dtype_map else repr(dtype)

    def name_of(self, value: str) -> str:
        """The Python identifier of a graph value inside build_module."""
        return self.names[value]

    def fresh(self, hint: str) -> str:
        """An identifier not used yet."""
        name, k = hint, 1
        while name in self.used or name in reserved_names():
            k += 1
            name = f"{hint}_{k}"
        self.used.add(name)
        return name

    def emit(self, expr: str, hint: str) -> str:
        """Bind `expr` to a fresh variable; returns its name."""
        name = self.fresh(hint)
        self.lines.append(f"{name} = bb.emit({expr})")
        return name

    def define(self, expr: str, hint: str) -> str:
        """Bind a plain Python value (not a Relax binding: an optimizer, a function added to the module); its name."""
        name = self.fresh(hint)
        self.lines.append(f"{name} = {expr}")
        return name

    def operand(self, operand: Any, dtype: str) -> str:
        """A graph operand as a Relax value of `dtype`: the variable, a (shared) cast of it, or a constant."""
        if not isinstance(operand, str):
            return f"R.const({float(operand) if is_float(dtype) else int(operand)!r}, {self.dt(dtype)})"
        if value_dtype(self.typed, operand) == dtype:
            return self.name_of(operand)
        key = (operand, dtype)
        if key not in self.casts:
            self.casts[key] = self.emit(f"R.op.astype({self.name_of(operand)}, {self.dt(dtype)})",
                                        f"{self.name_of(operand)}_{_SHORT[dtype]}")
        return self.casts[key]

    def param(self, operand: Any, shape: tuple[int, ...], dtype: str, fill: str, hint: str) -> str:
        """An optional parameter, or ones/zeros of `shape` when it is absent (Relax norms need both)."""
        if operand is None:
            return self.emit(f"R.op.{fill}({list(shape)!r}, {self.dt(dtype)})", hint)
        return self.operand(operand, dtype)

    def opmath_scalar(self, node: Node, compute: str) -> bool:
        """A 16-bit add/sub/mul/div with a 0-dim operand of a wider float dtype: PyTorch's CPU kernel reads that
        operand at its own precision (TensorIterator's original scalar value, in float opmath) and rounds only the
        result, so the node is computed in float32 and cast back (casting the scalar to float16 first turned
        448 * 146.2143 = 65504 into inf: triage8 b51bb42d36)."""
        if "opmath-scalar" not in OPS[node.op].tags or compute not in ("float16", "bfloat16"):
            return False
        if len(node.inputs) != 2 or not isinstance(node.inputs[1], str):
            return False  # only the second operand (TensorIterator's is_scalar(2)) is read that way
        v = self.typed.values[node.inputs[1]]
        return v.kind in ("tensor", "zerodim") and not v.shape and v.dtype in ("float32", "float64")

    def lower(self, node: Node) -> list[str]:
        """The bindings computing `node` in its declared output dtype, the last one named after the node."""
        t = self.typed.nodes[node.id]
        out, compute = t.value.dtype, t.compute_dtype or t.value.dtype
        first = node.inputs[0] if node.inputs else None
        x_shape = self.typed.values[first].shape if isinstance(first, str) else ()
        spec = OPS[node.op]
        if self.opmath_scalar(node, compute):
            compute = "float32"
        call = RelaxCall(self, node, compute, op_attrs(node), x_shape)
        expr = spec.relax(call)
        produced = spec.relax_dtype(call) if spec.relax_dtype else compute
        if produced != out:
            expr = f"R.op.astype({self.emit(expr, self.name_of(node.id) + '_' + _SHORT[produced])}, {self.dt(out)})"
        self.lines.append(f"{self.name_of(node.id)} = bb.emit({expr}, {node.id!r})")
        lines, self.lines = self.lines, []
        return lines


def render_module(graph: Graph, dtype_map: str | None = None, separate_outputs: bool = False) -> str:
    """`def build_module():` building the graph as a Relax IRModule with R.BlockBuilder, in A-normal form.

    With `dtype_map` ("T"), it is `def build_module(T):` and every dtype is looked up in T, so one function
    builds the graph in its declared dtypes, in float64 (the exact answer) or with float32 internals.
    With `separate_outputs`, each output leaves the dataflow block on its own and main returns the one output, or
    a tuple expression of them: what relax.transform.Gradient takes as its target (a tuple-typed variable it refuses).
    """
    typed = infer(graph)
    names = value_identifiers(graph)
    low = _Lowering(typed, names, dtype_map)
    head = f"def build_module({dtype_map}):" if dtype_map else "def build_module():"
    lines = [head] + ([] if dtype_map else ['    """The graph as a Relax IRModule (explicit casts where PyTorch promotes)."""'])
    lines.append("    bb = R.BlockBuilder()")
    for inp in graph.inputs:
        dtype = typed.values[inp.name].dtype
        lines.append(f"    {names[inp.name]} = R.Var({inp.name!r}, R.TensorType({list(inp.shape)!r}, {low.dt(dtype)}))")
    params = ", ".join(names[i.name] for i in graph.inputs)
    lines += [f"    with bb.function('main', [{params}]):", "        with bb.dataflow():"]
    for node in graph.nodes:
        breaks = typed.nodes[node.id].chain_break
        if breaks is not None:
            lines.append(f"            # chain break bridged: the {breaks.activation_dtype} activation and the "
                         f"{breaks.param_dtype} parameters meet in {typed.nodes[node.id].compute_dtype} "
                         "(PyTorch raises here)")
        lines += [f"            {line}" for line in low.lower(node)]
    outs = ", ".join(names[o] for o in graph.outputs)
    if separate_outputs:
        lines += [f"            out_{k} = bb.emit_output({names[o]})" for k, o in enumerate(graph.outputs)]
        ret = "out_0" if len(graph.outputs) == 1 else "R.Tuple([" + ", ".join(
            f"out_{k}" for k in range(len(graph.outputs))) + "])"
        lines += [f"        bb.emit_func_output({ret})", "    return bb.get()"]
    else:
        lines += [f"            outputs = bb.emit_output(R.Tuple([{outs}]))", "        bb.emit_func_output(outputs)",
                  "    return bb.get()"]
    return "\n".join(lines) + "\n"


RUNTIME = '''
TVM_DTYPES = {"bfloat16": ml_dtypes.bfloat16, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
              "float8_e5m2": ml_dtypes.float8_e5m2}


def apply_passes(mod, passes):
    """Apply the pipeline under test: relax.transform pass names, or (name, kwargs) pairs."""
    for entry in passes:
        name, kwargs = (entry, {}) if isinstance(entry, str) else entry
        mod = getattr(R.transform, name)(**kwargs)(mod)
    return mod


def compile_module(passes):
    """Build, transform, compile for the CPU (opt_level=3) and load into a Relax VM."""
    mod = apply_passes(build_module(), passes)
    with tvm.transform.PassContext(opt_level=3):
        executable = tvm.compile(mod, target="llvm")
    return R.VirtualMachine(executable, tvm.cpu())


def main_args(inputs):
    """main's arguments: the dtype-rounded float64 inputs as TVM tensors of the parameters' dtypes."""
    args = []
    for name, dtype in PARAM_DTYPES.items():
        value = np.asarray(inputs[name], dtype=np.float64).astype(TVM_DTYPES.get(dtype, dtype))
        args.append(tvm.runtime.tensor(np.array(value, order="C"), tvm.cpu()))  # keeps 0-dim shapes
    return args


def run_module(vm, inputs):
    """Run main on dtype-rounded float64 inputs; (float64 outputs, dtype names)."""
    outs = vm["main"](*main_args(inputs))
    arrays = [o.numpy() for o in outs]
    return [a.astype(np.float64) for a in arrays], [str(o.dtype) for o in outs]
'''


def render_runtime(graph: Graph, separate_outputs: bool = False) -> str:
    """build_module plus the helpers that compile and run it (PARAM_DTYPES: main's parameters in order)."""
    typed = infer(graph)
    dtypes = {inp.name: typed.values[inp.name].dtype for inp in graph.inputs}
    return render_module(graph, separate_outputs=separate_outputs) + f"\n\nPARAM_DTYPES = {dtypes!r}\n" + RUNTIME
