"""timm ConvNeXt-atto's layout (conv MLP, LayerNorm2d, depthwise 7x7), shrunk, float32, random weights,
one 1x3x32x32 image.

Config: `ConvNeXt(depths=(2, 2, 2, 2), dims=(8, 16, 32, 64), conv_mlp=True, ls_init_value=1.0,
num_classes=10)` (convnext_atto is depths (2, 2, 6, 2), dims (40, 80, 160, 320), conv_mlp=True; the layer
scale starts at 1.0 instead of 1e-6 so the random blocks are not identities); ~113k parameters.
Ops met: patchify conv2d, depthwise conv2d, permute + layer_norm (LayerNorm2d), 1x1 conv MLP with gelu,
mul by the layer scale (reshape), residual add, adaptive_avg_pool2d head, linear.

Verdict of `precfuzz audit corpus/zoo/convnext_atto.py`: exit 0, clean (measured 2026-12-01 on main
de8e5c1, 2 shared cores at load 3.5: 107 s). Under model.to(bfloat16) the float32 image meets bf16 parameters: an
input cast the caller owes; with `x` as bfloat16 every backend runs within its bound.
Weights are random, made in code (seeded); nothing is downloaded.
"""

import torch
import torch.nn as nn
from timm.models.convnext import ConvNeXt


def make() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The shrunk ConvNeXt-atto in eval mode and one [1, 3, 32, 32] image."""
    torch.manual_seed(0)
    model = ConvNeXt(depths=(2, 2, 2, 2), dims=(8, 16, 32, 64), conv_mlp=True, ls_init_value=1.0, num_classes=10)
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    return model.eval(), (x,)


def make_real() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """timm's convnext_atto at its real size (depths (2, 2, 6, 2), dims (40, 80, 160, 320); 3.7M parameters),
    random weights, one [1, 3, 224, 224] image (issue 37)."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("convnext_atto", pretrained=False)
    return model.eval(), (torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1)),)
