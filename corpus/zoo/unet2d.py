"""diffusers UNet2DModel (the DDPM-style unconditional UNet: timestep embedding, ResNet blocks with GroupNorm
and SiLU, a self-attention down/up block, strided-conv downsampling, nearest upsampling, skip cat), tiny
config, float32, random weights, one 1x3x16x16 sample at timestep 500.

Config: `UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
block_out_channels=(16, 32), down_block_types=("DownBlock2D", "AttnDownBlock2D"),
up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=8, attention_head_dim=8)`; forward returns
`.sample`; ~177k parameters.

Verdict of `precfuzz audit corpus/zoo/unet2d.py`: exit 0, clean (measured 2026-12-02 on main 0dc0a39, 2 shared
cores at load 5-8: 176 s). The false model.to(bfloat16) hazard of 2026-12-01 (export baking float32 into diffusers'
`t_emb.to(dtype=self.dtype)`) is gone: the module exported after the move is what that policy runs.
Weights are random, made in code (seeded); nothing is downloaded.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from diffusers import UNet2DModel  # noqa: E402


class Sample(nn.Module):
    """The UNet with forward returning the `.sample` tensor."""

    def __init__(self, unet: nn.Module) -> None:
        super().__init__()
        self.unet = unet

    def forward(self, sample: torch.Tensor, timestep: torch.Tensor) -> torch.Tensor:
        return self.unet(sample, timestep, return_dict=False)[0]


def make() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The tiny UNet2DModel in eval mode, one [1, 3, 16, 16] sample and timestep [500] (int64)."""
    torch.manual_seed(0)
    unet = UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
                       block_out_channels=(16, 32), down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                       up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=8, attention_head_dim=8)
    sample = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    return Sample(unet).eval(), (sample, torch.tensor([500]))


def loss(prediction: torch.Tensor, sample: torch.Tensor, timestep: torch.Tensor) -> torch.Tensor:
    """The diffusion (epsilon-prediction) loss (`precfuzz audit --train`, the training zoo): mean squared error in
    float32 against a fixed noise target made from the sample (deterministic: no RNG inside the captured graph)."""
    target = sample.float() * 0.5
    return (prediction.float() - target).square().mean()


def make_real() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The library's default config, `UNet2DModel()` (block widths 224/448/672/896, two layers per block; 274M
    parameters), random weights, one [1, 3, 16, 16] sample and timestep [500] (issue 37)."""
    torch.manual_seed(0)
    sample = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    return Sample(UNet2DModel()).eval(), (sample, torch.tensor([500]))
