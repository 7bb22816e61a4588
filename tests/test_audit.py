"""precfuzz audit (issue 15): model files in, verdicts out; bad input is one line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fuzzer.cli import main

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "corpus" / "models"


def _audit(*args: str, timeout: float = 600) -> tuple[int, str, str, float]:
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "fuzzer.cli", "audit", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)
    return done.returncode, done.stdout, done.stderr, time.monotonic() - t0


# ---------------------------------------------------------------- bad input (no executors started)


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


BAD_MODELS = {
    "not-a-tuple": ("import torch\ndef make():\n    return torch.nn.Linear(2, 2)\n", "must return (nn.Module"),
    "args-not-tensors": ("import torch\ndef make():\n    return torch.nn.Linear(2, 2), (3,)\n", "tuple of tensors"),
    "raises": ("def make():\n    raise ValueError('boom')\n", "raised ValueError: boom"),
}


@pytest.mark.parametrize("case", sorted(BAD_MODELS))
def test_bad_model_files_are_one_line_errors(case: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    text, expect = BAD_MODELS[case]
    assert main(["audit", _write(tmp_path, "m.py", text)]) == 2
    errors = [x for x in capsys.readouterr().err.splitlines() if x.startswith("precfuzz: error:")]
    assert len(errors) == 1 and expect in errors[0], errors


def test_missing_file_not_python_and_missing_func(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["audit", str(tmp_path / "nope.py")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["audit", _write(tmp_path, "m.txt", "x")]) == 2
    assert "not a Python file" in capsys.readouterr().err
    assert main(["audit", str(MODELS / "unet_block.py") + ":nothing_here"]) == 2
    assert "has no function 'nothing_here'" in capsys.readouterr().err


def test_untranslatable_ops_are_listed_with_their_lines(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    text = ("import torch\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
            "        y = torch.topk(x, 2, dim=-1).values\n"
            "        z = torch.kthvalue(x, 2, dim=-1).values\n"
            "        return y[:, :1] + z[:, None] + torch.sort(x, dim=-1).values\n\n"
            "def make():\n    return M(), (torch.randn(2, 4),)\n")
    assert main(["audit", _write(tmp_path, "model.py", text)]) == 2
    errors = [x for x in capsys.readouterr().err.splitlines() if x.startswith("precfuzz: error:")]
    assert len(errors) == 1
    err = errors[0]
    assert "3 op(s) precfuzz cannot translate" in err, err
    for op, line in (("aten.topk", 5), ("aten.kthvalue", 6), ("aten.sort", 7)):
        assert f"{op}" in err and f"model.py:{line}" in err, err


def test_regression_roll_repeat_and_broadcast_to_translate_exactly() -> None:
    """A new user's Swin (shifted windows: torch.roll, whose decomposition needs aten.fmod) and diffusers' UNet1D
    (timestep_embed.repeat, broadcast_to) stopped at "cannot translate"; they are slices, cats, reshapes, expands."""
    import numpy as np
    import torch

    from fuzzer.audit.translate import translate
    from fuzzer.interpret import evaluate
    from fuzzer.ir import input_values

    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            r = torch.roll(x, shifts=(-1, 2), dims=(1, 2)) + torch.roll(x, 3)
            e = t.repeat([2, 1, x.shape[2]]) + torch.broadcast_to(t[:1], (2, 3, 1))
            return r * e

    x = torch.arange(2 * 3 * 5, dtype=torch.float32).reshape(2, 3, 5)
    t = torch.tensor([[[0.5], [1.5], [-2.0]]])
    tr = translate(M(), (x, t))
    ops = {n.op for n in tr.case.graph.nodes}
    assert ops <= {"slice", "cat", "reshape", "expand", "add", "mul"}, ops
    got = evaluate(tr.case.graph, input_values(tr.case, 0), rounded=False)[tr.case.graph.outputs[0]]
    np.testing.assert_array_equal(got, M()(x, t).double().numpy())


def test_regression_softmax_with_a_dtype_and_log1p_translate() -> None:
    """issue 37: transformers' eager attention (Gemma2 has no other) calls softmax(..., dtype=torch.float32), and
    softplus / Mamba call log1p: both stopped the audit at "cannot translate". softmax with a dtype is a cast then
    the softmax, as PyTorch defines it; log1p is an op."""
    import numpy as np
    import torch

    from fuzzer.audit.translate import translate
    from fuzzer.interpret import evaluate
    from fuzzer.ir import input_values

    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            p = torch.nn.functional.softmax(x, dim=-1, dtype=torch.float32)
            return torch.log1p(p) + torch.log_softmax(x, -1, dtype=torch.float32)

    x = torch.randn(2, 5, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    tr = translate(M(), (x,))
    nodes = [(n.op, n.attrs.get("dtype")) for n in tr.case.graph.nodes]
    assert ("astype", "float32") in nodes and ("log1p", None) in nodes, nodes
    got = evaluate(tr.case.graph, input_values(tr.case, 0), rounded=False)[tr.case.graph.outputs[0]]
    np.testing.assert_allclose(got, M()(x).double().numpy(), rtol=1e-5, atol=1e-6)  # eager computes in float32


def test_regression_clips_argmax_pooling_translates() -> None:
    """issue 37: CLIP pools the hidden state at the end-of-text token, h[arange(B), input_ids.argmax(-1)]; the
    audit stopped at argmax. It is an op (int64 index, compared in the operand's dtype)."""
    import numpy as np
    import torch

    from fuzzer.audit.translate import translate
    from fuzzer.interpret import evaluate
    from fuzzer.ir import input_values

    class M(torch.nn.Module):
        def forward(self, h: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
            return h[torch.arange(h.shape[0]), ids.argmax(dim=-1)] * 2

    h, ids = torch.randn(2, 5, 3), torch.tensor([[1, 7, 3, 0, 0], [4, 2, 9, 9, 1]])
    tr = translate(M(), (h, ids))
    assert "argmax" in {n.op for n in tr.case.graph.nodes}
    got = evaluate(tr.case.graph, input_values(tr.case, 0), rounded=False)[tr.case.graph.outputs[0]]
    np.testing.assert_array_equal(got, M()(h, ids).double().numpy())


def test_regression_unet1d_kernel_resampling_and_reflect_pad_translate() -> None:
    """A new user's diffusers UNet1DModel stopped at "cannot translate": its Downsample1d/Upsample1d build a conv weight
    with `weight[indices, indices] = kernel` (aten.index_put_ on a zeros tensor, a buffer and an arange: computed at
    translation from constants only, a parameter of the graph) and pad with mode 'reflect' (the pad op's mode)."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    from fuzzer.audit.translate import translate
    from fuzzer.interpret import evaluate
    from fuzzer.ir import input_values

    class Down(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("kernel", torch.tensor([1 / 8, 3 / 8, 3 / 8, 1 / 8]))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = F.pad(x, (1, 1), "reflect")
            weight = x.new_zeros([x.shape[1], x.shape[1], self.kernel.shape[0]])
            indices = torch.arange(x.shape[1], device=x.device)
            weight[indices, indices] = self.kernel.to(weight)[None, :].expand(x.shape[1], -1)
            return F.conv1d(x, weight, stride=2)

    x = torch.linspace(-3, 3, 2 * 3 * 8, dtype=torch.float32).reshape(2, 3, 8)
    tr = translate(Down(), (x,))
    ops = [n.op for n in tr.case.graph.nodes]
    assert "pad" in ops and "conv1d" in ops, ops
    assert any("computed at translation" in n and "index_put_" in n for n in tr.notes), tr.notes
    pad = next(n for n in tr.case.graph.nodes if n.op == "pad")
    assert pad.attrs["mode"] == "reflect"
    got = evaluate(tr.case.graph, input_values(tr.case, 0), rounded=False)[tr.case.graph.outputs[0]]
    np.testing.assert_allclose(got, Down()(x).double().numpy(), rtol=1e-6, atol=1e-6)


def test_translation_keeps_the_trained_values_and_the_source_lines() -> None:
    import numpy as np

    from fuzzer.audit.load import load_model, split_target
    from fuzzer.audit.translate import translate
    from fuzzer.ir import input_values

    path, func = split_target(str(MODELS / "denoiser.py"))
    module, args = load_model(path, func)
    tr = translate(module, args, str(path))
    values = input_values(tr.case, 0)
    np.testing.assert_array_equal(values["proj.weight"], module.proj.weight.double().detach().numpy())
    np.testing.assert_array_equal(values["latents"], args[0].double().numpy())
    graph = tr.case.graph
    assert graph.input("proj.weight").role == "param" and graph.input("proj.weight").dtype == "bfloat16"
    conv = next(n for n in graph.nodes if n.op == "conv3d" and n.inputs[1] == "proj.weight")
    assert tr.sources[conv.id].code == "h = self.proj(noisy)"
    assert tr.sources[conv.id].module == "proj (Conv3d)"
    assert tr.notes and "captured with float32 parameters" in tr.notes[0]  # PyTorch raises on the bf16 model


def test_a_saved_audit_case_is_a_seed_for_run(tmp_path: Path) -> None:
    from fuzzer.audit.load import load_model, split_target
    from fuzzer.audit.translate import translate
    from fuzzer.commands.run import check_seeds
    from fuzzer.ir import load_case, save_case

    path, func = split_target(str(MODELS / "unet_block.py"))
    tr = translate(*load_model(path, func), str(path))
    save_case(tr.case, tmp_path / "unet.json")
    check_seeds(tmp_path)  # what `precfuzz run --seeds-dir` validates before a campaign
    assert load_case(tmp_path / "unet.json").graph == tr.case.graph


def test_the_hazard_locator_tells_a_missing_input_cast_from_a_promotion() -> None:
    from fuzzer.audit.verdict import from_inputs, input_culprits
    from fuzzer.ir import Graph, Input, Node, infer

    g = Graph((Input("x", (2, 4), "float32"), Input("w", (4,), "bfloat16", "param"),
               Input("l", (3, 4), "bfloat16", "param")),
              (Node("n", "layer_norm", ("x", "w"), {"normalized_shape": [4]}), Node("y", "linear", ("n", "l"))), ("y",))
    t = infer(g)
    assert from_inputs(g, t, "n") and from_inputs(g, t, "y")  # the linear's break cascades from the input
    assert input_culprits(g, t, "y") == ["x"]


# ---------------------------------------------------------------- the example models' documented verdicts


@pytest.mark.slow
def test_denoiser_names_the_conv_its_line_and_the_schedule_tensor() -> None:
    code, out, err, _ = _audit(str(MODELS / "denoiser.py"), "--json", "--no-minimize")
    assert code == 1, err[-2000:]
    verdict = json.loads(out)
    (hazard,) = verdict["hazards"]
    assert hazard["op"] == "conv3d" and hazard["module"] == "proj (Conv3d)"
    assert hazard["where"] == "denoiser.py:35" and hazard["code"] == "h = self.proj(noisy)"
    assert "model.to(bfloat16)" in hazard["rows"]
    assert any("sigma = timestep.float() / 1000" in c for c in hazard["promoted_by"])
    assert ".to(latents.dtype)" in hazard["fix"] and "denoiser.py:32" in hazard["fix"]
    assert verdict["bugs"] == []


@pytest.mark.slow
def test_denoiser_with_the_cast_fixed_is_clean() -> None:
    code, out, err, _ = _audit(str(MODELS / "denoiser.py") + ":make_fixed", "--json", "--no-minimize")
    assert code == 0, err[-2000:]
    verdict = json.loads(out)
    assert verdict["hazards"] == [] and verdict["bugs"] == []
    assert all(c["status"] == "runs" for c in verdict["table"])


@pytest.mark.slow
def test_transformer_block_prints_the_policy_by_backend_table() -> None:
    """Its wall time is measured by `make bench` (audit_transformer_s), not asserted here."""
    code, out, err, _ = _audit(str(MODELS / "transformer_block.py"), "--no-minimize")
    assert code == 0, out + err[-2000:]
    assert "policy \\ backend" in out and "model.to(bfloat16), exported after the move" in out
    assert "no model hazard" in out and "no backend bug" in out


@pytest.mark.slow
def test_unet_block_is_clean_once_the_caller_casts_its_input() -> None:
    code, out, err, _ = _audit(str(MODELS / "unet_block.py"), "--json", "--no-minimize")
    assert code == 0, err[-2000:]
    verdict = json.loads(out)
    assert verdict["hazards"] == [] and verdict["bugs"] == []
    (cast,) = verdict["input_casts"]
    assert cast["op"] == "conv2d" and "`x.to(torch.bfloat16)`" in cast["fix"]


def test_regression_a_device_move_is_no_cast_under_a_policy() -> None:
    """Zoo (GPT-2): `position_embeds.to(inputs_embeds.device)` is exported as _to_copy(dtype=float32), the dtype the
    example had; translated as a cast it pinned the value to float32 under model.to(bfloat16), and the audit
    reported a hazard the model does not have. A conversion to the dtype a value already has is no node."""
    import torch

    from fuzzer.audit.translate import translate

    class Moves(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(10, 4)

        def forward(self, ids: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            return x + self.emb(ids).to(x.device)

    tr = translate(Moves(), (torch.tensor([1, 2]), torch.randn(2, 4)))
    assert [n.op for n in tr.case.graph.nodes] == ["embedding", "add"]
