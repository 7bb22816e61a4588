"""timm ViT-tiny (VisionTransformer: patch embedding, class token, pre-norm blocks with fused attention), shrunk,
float32, random weights, one 1x3x32x32 image.

Config: `VisionTransformer(img_size=32, patch_size=8, embed_dim=48, depth=2, num_heads=3, num_classes=10)`
(ViT-tiny's 3 heads and MLP ratio 4 at 1/4 of its width and 1/6 of its depth: 16 patches + class token);
~67k parameters. Ops met: conv2d patch embedding, cat (class token), expand, layer_norm, linear, unbind of qkv,
scaled_dot_product_attention, gelu, slice/select of the class token.

Verdict of `precfuzz audit corpus/zoo/vit_tiny.py`: exit 0, clean (measured 2026-12-01 on main de8e5c1, 2
shared cores at load 3.5: 93 s). Under model.to(bfloat16) the float32 image is an input cast the caller owes; with
`x` as bfloat16 it runs.
Weights are random, made in code (seeded); nothing is downloaded.
"""

import torch
import torch.nn as nn
from timm.models.vision_transformer import VisionTransformer


def make() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The shrunk ViT-tiny in eval mode and one [1, 3, 32, 32] image."""
    torch.manual_seed(0)
    model = VisionTransformer(img_size=32, patch_size=8, embed_dim=48, depth=2, num_heads=3, num_classes=10)
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    return model.eval(), (x,)


def make_real() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """timm's vit_tiny_patch16_224 at its real size (12 blocks, 192 wide, 197 tokens; 5.7M parameters), random
    weights, one [1, 3, 224, 224] image (issue 37)."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False)
    return model.eval(), (torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1)),)
