"""A DDPM training step in the seed-000 pattern (`torch-xla-bf16-schedule-upcast`): diffusers DDPMScheduler's
float32 `alphas_cumprod` noise the bf16 latents (the arithmetic of `DDPMScheduler.add_noise`, written as users
write it, without the scheduler's cast of the table to the sample dtype), a bf16 diffusers UNet2DModel
predicts the noise, and the step's x0 estimate (`DDPMScheduler.step`'s formula (15)) comes back.

Config: `DDPMScheduler(num_train_timesteps=1000, beta_schedule="squaredcos_cap_v2")` (its alphas_cumprod a
float32 buffer of the step module); `UNet2DModel(sample_size=8, in_channels=4, out_channels=4,
layers_per_block=1, block_out_channels=(16, 32), down_block_types=("DownBlock2D", "DownBlock2D"),
up_block_types=("UpBlock2D", "UpBlock2D"), norm_num_groups=8)` moved with `.to(torch.bfloat16)`; bf16
latents and noise [1, 4, 8, 8], int64 timestep [500]; ~165k parameters.

Verdict of `precfuzz audit corpus/zoo/ddpm_step.py`: exit 1 (measured 2026-12-05 on main, 2 cores: 49 s) with the
hazard where it is: the UNet's `conv_in` gets the float32 `noisy` (PyTorch raises: `Input type (float) and bias type
(c10::BFloat16)`), the float32 coming from the `alphas_cumprod` buffer, fix `noisy.to(latents.dtype)` at
ddpm_step.py:44. (Before 2026-12-05 it named the time embedding's `linear_1`: the module raises on its example args,
so it is captured with float32 parameters, and torch.export wrote diffusers' `t_emb.to(dtype=self.dtype)` as a cast
to float32; such casts are now read as the module's dtype, `fuzzer.audit.translate.unbaked`.)
`ddpm_step.py:make_fixed` (the cast added): exit 0, clean (47 s).
Weights are random, made in code (seeded); nothing is downloaded.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from diffusers import DDPMScheduler, UNet2DModel  # noqa: E402


class DDPMStep(nn.Module):
    """Noise the latents at `timestep` with the float32 schedule, predict the noise, return the x0 estimate."""

    def __init__(self, unet: nn.Module, scheduler: DDPMScheduler, fixed: bool = False) -> None:
        super().__init__()
        self.unet = unet
        self.fixed = fixed
        self.register_buffer("alphas_cumprod", scheduler.alphas_cumprod.clone())  # float32, as the scheduler keeps it

    def forward(self, latents: torch.Tensor, noise: torch.Tensor, timestep: torch.Tensor) -> torch.Tensor:
        alpha_prod = self.alphas_cumprod[timestep]
        sqrt_alpha_prod = (alpha_prod ** 0.5).flatten().view(-1, 1, 1, 1)
        sqrt_one_minus_alpha_prod = ((1 - alpha_prod) ** 0.5).flatten().view(-1, 1, 1, 1)
        noisy = sqrt_alpha_prod * latents + sqrt_one_minus_alpha_prod * noise
        if self.fixed:
            noisy = noisy.to(latents.dtype)
        eps = self.unet(noisy, timestep, return_dict=False)[0]
        return (noisy - sqrt_one_minus_alpha_prod * eps) / sqrt_alpha_prod


def _make(fixed: bool) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    scheduler = DDPMScheduler(num_train_timesteps=1000, beta_schedule="squaredcos_cap_v2")
    unet = UNet2DModel(sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(16, 32),
                       down_block_types=("DownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "UpBlock2D"),
                       norm_num_groups=8)
    model = DDPMStep(unet.to(torch.bfloat16), scheduler, fixed=fixed)  # the migration: the UNet in bf16
    gen = torch.Generator().manual_seed(1)
    latents = torch.randn(1, 4, 8, 8, generator=gen).to(torch.bfloat16)
    noise = torch.randn(1, 4, 8, 8, generator=gen).to(torch.bfloat16)
    return model.eval(), (latents, noise, torch.tensor([500]))


def make() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The step as users write it (the float32 schedule promotes the noised latents)."""
    return _make(fixed=False)


def make_fixed() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The same step with the one-line fix: the noised latents cast back to the latents' dtype."""
    return _make(fixed=True)


def make_real() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The step around the library's default `UNet2DModel(in_channels=4, out_channels=4)` (274M parameters; the
    default but for the latent channels), bf16 as in `make`, [1, 4, 16, 16] latents and noise (issue 37)."""
    torch.manual_seed(0)
    scheduler = DDPMScheduler(num_train_timesteps=1000, beta_schedule="squaredcos_cap_v2")
    model = DDPMStep(UNet2DModel(in_channels=4, out_channels=4).to(torch.bfloat16), scheduler)
    gen = torch.Generator().manual_seed(1)
    latents = torch.randn(1, 4, 16, 16, generator=gen).to(torch.bfloat16)
    noise = torch.randn(1, 4, 16, 16, generator=gen).to(torch.bfloat16)
    return model.eval(), (latents, noise, torch.tensor([500]))
