"""Relax source for a graph: the module the TVM executors compile is the text their repro scripts contain.

Relax has no implicit type promotion, so every operand is cast (R.op.astype) to the dtype PyTorch would
compute the node in (fuzzer.ir.infer); Python-scalar literals become constants of that dtype, Python-scalar
inputs are 0-dim float64/int64 parameters cast at each use. Chain breaks (PyTorch raises) are bridged by
casting the activation to the compute dtype, as the ideal implementation does.
"""

from __future__ import annotations

from typing import Any

from ..dtypes import is_float
from ..ir import Graph, Node, TypedGraph, infer, op_attrs
from ..ops.linalg import conv_attrs
from .torch_render import ident

_RESERVED = {"R", "bb", "tvm", "np", "ml_dtypes", "outputs", "build_module", "compile_module", "run_module",
             "run_backend", "apply_passes", "round_to", "PASSES", "TVM_DTYPES", "main", "inputs"}
_BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide"}
_UNARY = {"neg": "negative", "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "sin": "sin",
          "cos": "cos", "tanh": "tanh", "gelu": "nn.gelu", "silu": "nn.silu"}
_REDUCE = {"sum": "sum", "mean": "mean"}


def name_of(value: str) -> str:
    """The Python identifier of a graph value inside build_module."""
    out = ident(value)
    return f"v_{out}" if out in _RESERVED else out


def value_dtype(typed: TypedGraph, value: str) -> str:
    """The Relax dtype a value has in the module (Python scalars are 0-dim float64/int64 tensors)."""
    return typed.values[value].dtype


def bridged(graph: Graph) -> list[str]:
    """Nodes whose chain break (PyTorch raises) the lowering bridges with a cast to the compute dtype."""
    return sorted(infer(graph).chain_breaks())


class _Lowering:
    """Renders one node as Relax expressions; `lines` collects extra bindings the node needs."""

    def __init__(self, typed: TypedGraph) -> None:
        self.typed = typed
        self.lines: list[str] = []

    def operand(self, operand: Any, dtype: str) -> str:
        """A graph operand as a Relax expression of `dtype` (cast or constant as needed)."""
        if isinstance(operand, str):
            expr = name_of(operand)
            have = value_dtype(self.typed, operand)
            return expr if have == dtype else f"R.op.astype({expr}, {dtype!r})"
        value = float(operand) if is_float(dtype) else int(operand)
        return f"R.const({value!r}, {dtype!r})"

    def default(self, operand: Any, shape: tuple[int, ...], dtype: str, fill: str) -> str:
        """An optional parameter, or ones/zeros of `shape` when it is absent (Relax norms need both)."""
        if operand is None:
            return f"R.op.{fill}({list(shape)!r}, {dtype!r})"
        return self.operand(operand, dtype)

    def bind(self, name: str, expr: str) -> str:
        """Emit an intermediate binding; returns its name."""
        self.lines.append(f"{name} = bb.emit({expr})")
        return name

    def lower(self, node: Node) -> str:
        """The Relax expression computing `node` in its declared output dtype."""
        t = self.typed.nodes[node.id]
        out = t.value.dtype
        compute = t.compute_dtype or out
        expr = self.expr(node, compute, op_attrs(node))
        return expr if compute == out else f"R.op.astype({expr}, {out!r})"

    def expr(self, node: Node, dt: str, attrs: dict[str, Any]) -> str:
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
            return a(0)
        if op in _REDUCE:
            return f"R.op.{_REDUCE[op]}({a(0)}, axis={_dims(attrs['dims'])}, keepdims={bool(attrs['keepdim'])})"
        if op == "var":
            return self.var(node, dt, attrs, x_shape)
        if op in ("softmax", "log_softmax"):
            return f"R.op.nn.{op}({a(0)}, axis={int(attrs['dim'])})"
        if op == "layer_norm":
            shape = tuple(attrs["normalized_shape"])
            axes = list(range(-len(shape), 0))
            return (f"R.op.nn.layer_norm({a(0)}, {self.default(ins[1], shape, dt, 'ones')}, "
                    f"{self.default(ins[2], shape, dt, 'zeros')}, axes={axes}, epsilon={attrs['eps']!r})")
        if op == "rms_norm":
            return self.rms_norm(node, dt, attrs)
        channels = (x_shape[1],) if len(x_shape) > 1 else ()
        spatial = list(range(2, len(x_shape)))
        if op == "group_norm":
            return (f"R.op.nn.group_norm({a(0)}, {self.default(ins[1], channels, dt, 'ones')}, "
                    f"{self.default(ins[2], channels, dt, 'zeros')}, num_groups={attrs['num_groups']}, "
                    f"channel_axis=1, axes={spatial}, epsilon={attrs['eps']!r})")
        if op == "instance_norm":
            return (f"R.op.nn.instance_norm({a(0)}, {self.default(ins[1], channels, dt, 'ones')}, "
                    f"{self.default(ins[2], channels, dt, 'zeros')}, channel_axis=1, axes={spatial}, "
                    f"epsilon={attrs['eps']!r})")
        if op == "batch_norm":
            return (f"R.TupleGetItem(R.op.nn.batch_norm({a(0)}, {self.default(ins[3], channels, dt, 'ones')}, "
                    f"{self.default(ins[4], channels, dt, 'zeros')}, {a(1)}, {a(2)}, axis=1, "
                    f"epsilon={attrs['eps']!r}, training=False), 0)")
        if op in ("conv1d", "conv2d", "conv3d"):
            stride, padding, dilation, groups = conv_attrs(int(op[4]), attrs)
            conv = (f"R.op.nn.{op}({a(0)}, {a(1)}, strides={list(stride)}, padding={list(padding)}, "
                    f"dilation={list(dilation)}, groups={groups})")
            if ins[2] is None:
                return conv
            bias_shape = [1, -1] + [1] * (len(x_shape) - 2)
            return f"R.op.add({conv}, R.op.reshape({a(2)}, {bias_shape}))"
        if op == "linear":
            return f"R.op.linear({a(0)}, {a(1)}{'' if ins[2] is None else ', ' + a(2)})"
        if op in ("matmul", "bmm"):
            return f"R.op.matmul({a(0)}, {a(1)})"
        raise NotImplementedError(f"no Relax lowering for op {op!r}")

    def var(self, node: Node, dt: str, attrs: dict[str, Any], shape: tuple[int, ...]) -> str:
        """Variance: R.op.variance, or TVM's own variance formula with the corrected divisor."""
        axis, keep, corr = _dims(attrs["dims"]), bool(attrs["keepdim"]), attrs["correction"]
        x = self.operand(node.inputs[0], dt)
        if not corr:
            return f"R.op.variance({x}, axis={axis}, keepdims={keep})"
        dims = range(len(shape)) if attrs["dims"] is None else [int(d) % len(shape) for d in attrs["dims"]]
        count = 1
        for d in set(dims):
            count *= shape[d]
        dev = self.bind(f"{name_of(node.id)}_dev", f"R.op.subtract({x}, R.op.mean({x}, axis={axis}, keepdims=True))")
        sq = f"R.op.sum(R.op.multiply({dev}, {dev}), axis={axis}, keepdims={keep})"
        return f"R.op.divide({sq}, R.const({float(count - corr)!r}, {dt!r}))"

    def rms_norm(self, node: Node, dt: str, attrs: dict[str, Any]) -> str:
        """rms_norm; a weight of another dtype multiplies the normalized input after promotion (as PyTorch)."""
        shape = tuple(attrs["normalized_shape"])
        axes = list(range(-len(shape), 0))
        x_dt = value_dtype(self.typed, node.inputs[0])  # type: ignore[arg-type]
        w = node.inputs[1] if len(node.inputs) > 1 else None
        if w is None or value_dtype(self.typed, w) == x_dt:  # type: ignore[arg-type]
            return (f"R.op.nn.rms_norm({self.operand(node.inputs[0], dt)}, {self.default(w, shape, dt, 'ones')}, "
                    f"axes={axes}, epsilon={attrs['eps']!r})")
        normed = (f"R.op.nn.rms_norm({name_of(node.inputs[0])}, R.op.ones({list(shape)!r}, {x_dt!r}), "  # type: ignore[arg-type]
                  f"axes={axes}, epsilon={attrs['eps']!r})")
        return f"R.op.multiply(R.op.astype({normed}, {dt!r}), {self.operand(w, dt)})"


def _dims(dims: Any) -> str:
    return "None" if dims is None else repr([int(d) for d in dims])


def render_module(graph: Graph) -> str:
    """`def build_module():` building the graph as a Relax IRModule with R.BlockBuilder, one emit per node."""
    typed = infer(graph)
    low = _Lowering(typed)
    lines = ["def build_module():", '    """The graph as a Relax IRModule (explicit casts where PyTorch promotes)."""',
             "    bb = R.BlockBuilder()"]
    for inp in graph.inputs:
        dtype = typed.values[inp.name].dtype
        lines.append(f"    {name_of(inp.name)} = R.Var({inp.name!r}, R.TensorType({list(inp.shape)!r}, {dtype!r}))")
    params = ", ".join(name_of(i.name) for i in graph.inputs)
    lines += [f"    with bb.function('main', [{params}]):", "        with bb.dataflow():"]
    for node in graph.nodes:
        breaks = typed.nodes[node.id].chain_break
        expr = low.lower(node)
        if breaks is not None:
            lines.append(f"            # chain break bridged: {breaks.activation_dtype} activation cast to "
                         f"the {breaks.param_dtype} parameters' dtype (PyTorch raises here)")
        lines += [f"            {line}" for line in low.lines]
        low.lines.clear()
        lines.append(f"            {name_of(node.id)} = bb.emit({expr}, {node.id!r})")
    outs = ", ".join(name_of(o) for o in graph.outputs)
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
        args.append(tvm.runtime.tensor(np.ascontiguousarray(value), tvm.cpu()))
    outs = vm["main"](*args)
    arrays = [o.numpy() for o in outs]
    return [a.astype(np.float64) for a in arrays], [str(o.dtype) for o in outs]
'''


def render_runtime(graph: Graph) -> str:
    """build_module plus the helpers that compile and run it (PARAM_DTYPES: main's parameters in order)."""
    typed = infer(graph)
    dtypes = {inp.name: typed.values[inp.name].dtype for inp in graph.inputs}
    return render_module(graph) + f"\n\nPARAM_DTYPES = {dtypes!r}\n" + RUNTIME
