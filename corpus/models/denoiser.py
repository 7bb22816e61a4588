"""A flow-matching denoiser step after the XLA_USE_BF16 -> model.to(torch.bfloat16) migration (seed
`torch-xla-bf16-schedule-upcast`): bf16 latents and noise, an integer timestep, and the noise schedule
computed in float32 (`timestep.float() / 1000`), mixed into the latents ahead of a bf16 Conv3d patch embedding.

Expected verdict of `precfuzz audit corpus/models/denoiser.py` (exit 1): one model hazard under
model.to(bfloat16) (the module as given): the Conv3d `proj` at `h = self.proj(noisy)` gets a float32
activation, promoted by the float32 schedule `sigma` (`sigma = timestep.float() / 1000`) where it meets
the bf16 latents; fix: cast the mix back, `.to(latents.dtype)`. Autocast and the pre-migration
XLA_USE_BF16=1 model run; TVM bridges the break with casts.

`precfuzz audit corpus/models/denoiser.py:make_fixed` (the cast added): no hazard, exit 0.
Weights are random, made in code (seeded); nothing is downloaded.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Denoiser(nn.Module):
    """Patch-embed the noised latents with a Conv3d, then a SiLU and a 1x1x1 Conv3d back to the latent channels."""

    def __init__(self, channels: int = 16, hidden: int = 32, fixed: bool = False) -> None:
        super().__init__()
        self.fixed = fixed
        self.proj = nn.Conv3d(channels, hidden, kernel_size=(1, 2, 2), stride=(1, 2, 2))
        self.out = nn.Conv3d(hidden, channels, kernel_size=1)

    def forward(self, latents: torch.Tensor, noise: torch.Tensor, timestep: torch.Tensor) -> torch.Tensor:
        sigma = timestep.float() / 1000
        sigma = sigma.view(-1, 1, 1, 1, 1)
        noisy = (1 - sigma) * latents + sigma * noise
        if self.fixed:
            noisy = noisy.to(latents.dtype)
        h = self.proj(noisy)
        return self.out(F.silu(h))


def _make(fixed: bool) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    gen = torch.Generator().manual_seed(0)
    model = Denoiser(fixed=fixed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.rand(p.shape, generator=gen) * 0.25 - 0.125)
    model = model.to(torch.bfloat16)  # the migration: parameters in bf16
    latents = torch.randn(1, 16, 1, 8, 8, generator=gen).to(torch.bfloat16)
    noise = torch.randn(1, 16, 1, 8, 8, generator=gen).to(torch.bfloat16)
    timestep = torch.tensor([500])
    return model, (latents, noise, timestep)


def make() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The migrated denoiser as the user wrote it (the schedule promotes the latents)."""
    return _make(fixed=False)


def make_fixed() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The same model with the one-line fix: the noised latents cast back to the latents' dtype."""
    return _make(fixed=True)
