"""diffusers UNet2DConditionModel (the Stable Diffusion UNet: timestep embedding, ResNet blocks, transformer
blocks with self- and cross-attention on text states, GEGLU feed-forward), tiny config, float32, random
weights, one 1x4x8x8 latent at timestep 500 with 6 text-state tokens.

Config: `UNet2DConditionModel(sample_size=8, in_channels=4, out_channels=4, layers_per_block=1,
block_out_channels=(16, 32), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32, norm_num_groups=8,
attention_head_dim=8)`; forward returns `.sample`; ~203k parameters.

Verdict of `precfuzz audit corpus/zoo/unet2d_condition.py`: exit 0, clean (measured 2026-12-02 on main 0dc0a39,
2 shared cores at load 5-8: 169 s). The false model.to(bfloat16) hazard of 2026-12-01 at the time embedding's
`linear_1` is gone: the module exported after the move is what that policy runs.
Weights are random, made in code (seeded); nothing is downloaded.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from diffusers import UNet2DConditionModel  # noqa: E402


class Sample(nn.Module):
    """The conditional UNet with forward returning the `.sample` tensor."""

    def __init__(self, unet: nn.Module) -> None:
        super().__init__()
        self.unet = unet

    def forward(self, sample: torch.Tensor, timestep: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        return self.unet(sample, timestep, encoder_hidden_states=text, return_dict=False)[0]


def make() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The tiny conditional UNet in eval mode, a [1, 4, 8, 8] latent, timestep [500] and [1, 6, 32] text states."""
    torch.manual_seed(0)
    unet = UNet2DConditionModel(sample_size=8, in_channels=4, out_channels=4, layers_per_block=1,
                                block_out_channels=(16, 32), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
                                norm_num_groups=8, attention_head_dim=8)
    gen = torch.Generator().manual_seed(1)
    latent = torch.randn(1, 4, 8, 8, generator=gen)
    text = torch.randn(1, 6, 32, generator=gen)
    return Sample(unet).eval(), (latent, torch.tensor([500]), text)


def make_real() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The library's default config, `UNet2DConditionModel()` (Stable Diffusion 1.x's UNet: widths 320/640/1280/1280,
    cross-attention to 1280-wide text states; 872M parameters), random weights, a [1, 4, 16, 16] latent, timestep
    [500] and [1, 8, 1280] text states (issue 37)."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    latent = torch.randn(1, 4, 16, 16, generator=gen)
    text = torch.randn(1, 8, 1280, generator=gen)
    return Sample(UNet2DConditionModel()).eval(), (latent, torch.tensor([500]), text)
