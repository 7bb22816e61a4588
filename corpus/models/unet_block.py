"""A UNet-style residual conv block: conv2d -> group_norm -> SiLU -> conv2d, plus the skip; float32, random weights.

Expected verdict of `precfuzz audit corpus/models/unet_block.py` (exit 0): no model hazard and no backend bug.
Under model.to(bfloat16) the float32 input `x` meets the bf16 conv weights at the first op: an input cast
the caller owes (reported as such); with `x` passed as bfloat16 the block runs. Every policy and backend runs
within its error bound. Weights are random, made in code (seeded); nothing is downloaded.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ResBlock(nn.Module):
    """x + conv2(silu(group_norm(conv1(x))))."""

    def __init__(self, channels: int = 8, groups: int = 4) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm = nn.GroupNorm(groups, channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(x)
        h = F.silu(self.norm(h))
        return x + self.conv2(h)


def make() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The block in float32 and one [1, 8, 8, 8] input."""
    torch.manual_seed(0)
    model = ResBlock()
    x = torch.randn(1, 8, 8, 8, generator=torch.Generator().manual_seed(1))
    return model, (x,)
