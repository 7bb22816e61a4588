"""Relax source for a graph: the module the TVM executors compile is the text their repro scripts contain.

Relax has no implicit type promotion, so every operand is cast (R.op.astype) to the dtype PyTorch would
compute the node in (fuzzer.ir.infer); Python-scalar literals become constants of that dtype, Python-scalar
inputs are 0-dim float64/int64 parameters cast at each use. Chain breaks (PyTorch raises) are bridged by
casting the activation to the compute dtype, as the ideal implementation does. Low-precision conv, linear
and matmul accumulate in float32 (out_dtype, as TVM's PyTorch frontend emits them) and are cast back.
"""

from __future__ import annotations

from typing import Any

from ..dtypes import LOW_PRECISION, is_float
from ..ir import Graph, Node, TypedGraph, infer, op_attrs
from ..ops.linalg import conv_attrs
from ..promotion import promote_types
from ..identifiers import reserved_names, value_identifiers
_BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide"}
_UNARY = {"neg": "negative", "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "sin": "sin",
          "cos": "cos", "tanh": "tanh", "silu": "nn.silu"}
_REDUCE = {"sum": "sum", "mean": "mean"}
# Ops given out_dtype="float32" for float16/bfloat16 operands (TVM's PyTorch frontend does the same); the
# result is cast back to the node's dtype. Other reductions (sum, mean, norms) keep TVM's own accumulation.
ACCUMULATING = ("conv1d", "conv2d", "conv3d", "linear", "matmul", "bmm")
_SHORT = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64"}


def value_dtype(typed: TypedGraph, value: str) -> str:
    """The Relax dtype a value has in the module (Python scalars are 0-dim float64/int64 tensors)."""
    return typed.values[value].dtype


def bridged(graph: Graph) -> list[str]:
    """Nodes whose chain break (PyTorch raises) the lowering bridges with a cast to the compute dtype."""
    return sorted(infer(graph).chain_breaks())


class _Lowering:
    """Renders nodes as BlockBuilder emits in A-normal form: every call gets its own binding (casts are shared)."""

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

    def lower(self, node: Node) -> list[str]:
        """The bindings computing `node` in its declared output dtype, the last one named after the node."""
        t = self.typed.nodes[node.id]
        out, compute = t.value.dtype, t.compute_dtype or t.value.dtype
        expr = self.expr(node, compute, op_attrs(node))
        if self.produced(node, compute) != out:
            expr = f"R.op.astype({self.emit(expr, self.name_of(node.id) + '_' + _SHORT[self.produced(node, compute)])}, {self.dt(out)})"
        self.lines.append(f"{self.name_of(node.id)} = bb.emit({expr}, {node.id!r})")
        lines, self.lines = self.lines, []
        return lines

    def produced(self, node: Node, compute: str) -> str:
        """The dtype the node's Relax op yields (float32 accumulators; rms_norm in a promoted dtype)."""
        if node.op == "rms_norm" and len(node.inputs) > 1 and node.inputs[1] is not None:
            return promote_types(*(value_dtype(self.typed, v) for v in node.inputs[:2]))  # type: ignore[arg-type]
        return accumulate_dtype(node.op, compute)

    def expr(self, node: Node, dt: str, attrs: dict[str, Any]) -> str:
        """The final call of a node, its operands already bound."""
        op, ins = node.op, list(node.inputs) + [None] * 5
        a = lambda i: self.operand(ins[i], dt)  # noqa: E731 - local shorthand
        x_shape = self.typed.values[ins[0]].shape if isinstance(ins[0], str) else ()
        if op in _BINARY:
            return f"R.op.{_BINARY[op]}({a(0)}, {a(1)})"
        if op in _UNARY:
            return f"R.op.{_UNARY[op]}({a(0)})"
        if op == "gelu":
            return f"R.op.nn.{'gelu_tanh' if attrs['approximate'] == 'tanh' else 'gelu'}({a(0)})"
        if op == "astype":
            return f"R.op.astype({self.name_of(ins[0])}, {self.dt(dt)})"
        if op in _REDUCE:
            return f"R.op.{_REDUCE[op]}({a(0)}, axis={_dims(attrs['dims'])}, keepdims={bool(attrs['keepdim'])})"
        if op == "var":
            return self.var(node, dt, attrs, x_shape)
        if op in ("softmax", "log_softmax"):
            return f"R.op.nn.{op}({a(0)}, axis={int(attrs['dim'])})"
        if op in ("conv1d", "conv2d", "conv3d", "linear", "matmul", "bmm"):
            return self.product(node, dt, attrs, x_shape)
        return self.norm(node, dt, attrs, x_shape)

    def norm(self, node: Node, dt: str, attrs: dict[str, Any], x_shape: tuple[int, ...]) -> str:
        """layer/rms/group/batch/instance norm with the Relax op of the same name."""
        op, ins, eps = node.op, list(node.inputs) + [None] * 5, attrs["eps"]
        x = self.operand(ins[0], dt)
        if op in ("layer_norm", "rms_norm"):
            shape = tuple(attrs["normalized_shape"])
            axes = list(range(-len(shape), 0))
            if op == "rms_norm":
                if ins[1] is not None:  # PyTorch computes with the weight in the promoted dtype (opmath)
                    dt = promote_types(value_dtype(self.typed, ins[0]), value_dtype(self.typed, ins[1]))
                    x = self.operand(ins[0], dt)
                w = self.param(ins[1], shape, dt, "ones", f"{self.name_of(node.id)}_weight")
                return f"R.op.nn.rms_norm({x}, {w}, axes={axes}, epsilon={eps!r})"
            w = self.param(ins[1], shape, dt, "ones", f"{self.name_of(node.id)}_weight")
            b = self.param(ins[2], shape, dt, "zeros", f"{self.name_of(node.id)}_bias")
            return f"R.op.nn.layer_norm({x}, {w}, {b}, axes={axes}, epsilon={eps!r})"
        channels, spatial = (x_shape[1],), list(range(2, len(x_shape)))
        if op == "batch_norm":
            w = self.param(ins[3], channels, dt, "ones", f"{self.name_of(node.id)}_weight")
            b = self.param(ins[4], channels, dt, "zeros", f"{self.name_of(node.id)}_bias")
            m, v = self.operand(ins[1], dt), self.operand(ins[2], dt)
            bn = self.emit(f"R.op.nn.batch_norm({x}, {w}, {b}, {m}, {v}, axis=1, epsilon={eps!r}, "
                           f"training={bool(attrs['training'])})",
                           f"{self.name_of(node.id)}_bn")
            return f"R.TupleGetItem({bn}, 0)"
        w = self.param(ins[1], channels, dt, "ones", f"{self.name_of(node.id)}_weight")
        b = self.param(ins[2], channels, dt, "zeros", f"{self.name_of(node.id)}_bias")
        if op == "group_norm":
            return (f"R.op.nn.group_norm({x}, {w}, {b}, num_groups={attrs['num_groups']}, channel_axis=1, "
                    f"axes={spatial}, epsilon={eps!r})")
        if op == "instance_norm":
            return f"R.op.nn.instance_norm({x}, {w}, {b}, channel_axis=1, axes={spatial}, epsilon={eps!r})"
        raise NotImplementedError(f"no Relax lowering for op {op!r}")

    def product(self, node: Node, dt: str, attrs: dict[str, Any], x_shape: tuple[int, ...]) -> str:
        """Conv, linear, matmul: low-precision operands accumulate in float32 (out_dtype), as TVM's PyTorch frontend emits them."""
        ins = list(node.inputs) + [None]
        acc = accumulate_dtype(node.op, dt)
        out_dtype = "" if acc == dt else f", out_dtype={self.dt(acc)}"
        a, b = self.operand(ins[0], dt), self.operand(ins[1], dt)
        bias = None if ins[2] is None else self.operand(ins[2], acc)
        if node.op == "linear":
            return f"R.op.linear({a}, {b}{'' if bias is None else ', ' + bias}{out_dtype})"
        if node.op in ("matmul", "bmm"):
            return f"R.op.matmul({a}, {b}{out_dtype})"
        stride, padding, dilation, groups = conv_attrs(int(node.op[4]), attrs)
        conv = (f"R.op.nn.{node.op}({a}, {b}, strides={list(stride)}, padding={list(padding)}, "
                f"dilation={list(dilation)}, groups={groups}{out_dtype})")
        if bias is None:
            return conv
        conv = self.emit(conv, f"{self.name_of(node.id)}_conv")
        shaped = self.emit(f"R.op.reshape({bias}, {[1, -1] + [1] * (len(x_shape) - 2)})", f"{self.name_of(node.id)}_bias")
        return f"R.op.add({conv}, {shaped})"

    def var(self, node: Node, dt: str, attrs: dict[str, Any], shape: tuple[int, ...]) -> str:
        """Variance: R.op.variance, or TVM's own variance formula (mean of squared deviations) with n - correction."""
        axis, keep, corr = _dims(attrs["dims"]), bool(attrs["keepdim"]), attrs["correction"]
        x = self.operand(node.inputs[0], dt)
        if not corr:
            return f"R.op.variance({x}, axis={axis}, keepdims={keep})"
        dims = set(range(len(shape)) if attrs["dims"] is None else (int(d) % len(shape) for d in attrs["dims"]))
        count = 1
        for d in dims:
            count *= shape[d]
        hint = self.name_of(node.id)
        mean = self.emit(f"R.op.mean({x}, axis={axis}, keepdims=True)", f"{hint}_mean")
        dev = self.emit(f"R.op.subtract({x}, {mean})", f"{hint}_dev")
        sq = self.emit(f"R.op.multiply({dev}, {dev})", f"{hint}_sq")
        total = self.emit(f"R.op.sum({sq}, axis={axis}, keepdims={keep})", f"{hint}_sum")
        return f"R.op.divide({total}, R.const({float(count - corr)!r}, {self.dt(dt)}))"


def accumulate_dtype(op: str, dtype: str) -> str:
    """The dtype a node's Relax op yields: float32 (its out_dtype) for low-precision conv/linear/matmul."""
    return "float32" if op in ACCUMULATING and dtype in LOW_PRECISION else dtype


def _dims(dims: Any) -> str:
    return "None" if dims is None else repr([int(d) for d in dims])


def render_module(graph: Graph, dtype_map: str | None = None) -> str:
    """`def build_module():` building the graph as a Relax IRModule with R.BlockBuilder, in A-normal form.

    With `dtype_map` ("T"), it is `def build_module(T):` and every dtype is looked up in T, so one function
    builds the graph in its declared dtypes, in float64 (the exact answer) or with float32 internals.
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
    lines += [f"            outputs = bb.emit_output(R.Tuple([{outs}]))", "        bb.emit_func_output(outputs)",
              "    return bb.get()"]
    return "\n".join(lines) + "\n"


RUNTIME = '''
TVM_DTYPES = {"bfloat16": ml_dtypes.bfloat16}


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


def run_module(vm, inputs):
    """Run main on dtype-rounded float64 inputs; (float64 outputs, dtype names)."""
    args = []
    for name, dtype in PARAM_DTYPES.items():
        value = np.asarray(inputs[name], dtype=np.float64).astype(TVM_DTYPES.get(dtype, dtype))
        args.append(tvm.runtime.tensor(np.array(value, order="C"), tvm.cpu()))  # keeps 0-dim shapes
    outs = vm["main"](*args)
    arrays = [o.numpy() for o in outs]
    return [a.astype(np.float64) for a in arrays], [str(o.dtype) for o in outs]
'''


def render_runtime(graph: Graph) -> str:
    """build_module plus the helpers that compile and run it (PARAM_DTYPES: main's parameters in order)."""
    typed = infer(graph)
    dtypes = {inp.name: typed.values[inp.name].dtype for inp in graph.inputs}
    return render_module(graph) + f"\n\nPARAM_DTYPES = {dtypes!r}\n" + RUNTIME
