"""A video DiT block in the seed-000 pattern (`torch-xla-bf16-schedule-upcast`, found on Wan2.2 pretraining):
a flow-matching schedule computed in float32 (`sigma = timestep.float() / 1000`) mixes bf16 video latents and
noise ahead of a bf16 diffusers WanTransformer3DModel, whose Conv3d patch embedding gets the result.

Config: `WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16,
in_channels=4, out_channels=4, text_dim=32, freq_dim=32, ffn_dim=64, num_layers=1, rope_max_seq_len=32)` moved
with `.to(torch.bfloat16)` (one transformer block: Conv3d patchify, 3D rotary embedding, self- and
cross-attention with RMS q/k norms, adaLN modulation); bf16 latents and noise [1, 4, 2, 8, 8] (2 frames
of 8x8), int64 timestep [500], bf16 text states [1, 6, 32]; ~25k parameters.

Verdict of `precfuzz audit corpus/zoo/video_wan_block.py`: exit 1 (measured 2026-12-01 on main de8e5c1, 2
shared cores at load 3.5: 103 s): the model hazard under model.to(bfloat16) (the module as given): the Conv3d
`patch_embedding` (transformer_wan.py:670) gets float32, promoted by `sigma = timestep.float() / 1000`
(video_wan_block.py:39); fix: `noisy.to(latents.dtype)` at video_wan_block.py:41. A second hazard under
autocast(bfloat16) on torch_xla at scaled_dot_product_attention is a false alarm (checked: torch_xla's autocast
runs this block). `video_wan_block.py:make_fixed` (the cast added): exit 0, clean (112 s).
Weights are random, made in code (seeded); nothing is downloaded.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from diffusers import WanTransformer3DModel  # noqa: E402


class FlowMatchingStep(nn.Module):
    """Noise the latents with the float32 flow-matching schedule, then the video transformer."""

    def __init__(self, transformer: nn.Module, fixed: bool = False) -> None:
        super().__init__()
        self.transformer = transformer
        self.fixed = fixed

    def forward(self, latents: torch.Tensor, noise: torch.Tensor, timestep: torch.Tensor,
                text: torch.Tensor) -> torch.Tensor:
        sigma = timestep.float() / 1000
        sigma = sigma.view(-1, 1, 1, 1, 1)
        noisy = (1 - sigma) * latents + sigma * noise
        if self.fixed:
            noisy = noisy.to(latents.dtype)
        return self.transformer(noisy, timestep, text, return_dict=False)[0]


def _make(fixed: bool) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    transformer = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16,
                                        in_channels=4, out_channels=4, text_dim=32, freq_dim=32, ffn_dim=64,
                                        num_layers=1, rope_max_seq_len=32)
    model = FlowMatchingStep(transformer.to(torch.bfloat16), fixed=fixed)  # the migration: parameters in bf16
    gen = torch.Generator().manual_seed(1)
    latents = torch.randn(1, 4, 2, 8, 8, generator=gen).to(torch.bfloat16)
    noise = torch.randn(1, 4, 2, 8, 8, generator=gen).to(torch.bfloat16)
    text = torch.randn(1, 6, 32, generator=gen).to(torch.bfloat16)
    return model.eval(), (latents, noise, torch.tensor([500]), text)


def make() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The step as users write it (the float32 schedule promotes the noised latents)."""
    return _make(fixed=False)


def make_fixed() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The same step with the one-line fix: the noised latents cast back to the latents' dtype."""
    return _make(fixed=True)


def loss(prediction: torch.Tensor, latents: torch.Tensor, noise: torch.Tensor, timestep: torch.Tensor,
         text: torch.Tensor) -> torch.Tensor:
    """The flow-matching loss of the pretraining loop (`precfuzz audit --train`, the training zoo): the velocity
    target noise - latents, mean squared error in float32."""
    target = noise.float() - latents.float()
    return (prediction.float() - target).square().mean()


# Real size (issue 37): `WanTransformer3DModel()`'s default is Wan2.1-14B (14.3B parameters, 57 GB in float32), past
# the 16 GB an audit at scale may take.
REAL_SIZE = "WanTransformer3DModel() is 14B (57 GB of float32 weights)"
