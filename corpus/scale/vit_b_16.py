"""torchvision vit_b_16 at its real size (the library's default config: 86.6M parameters, 12 encoder layers),
random weights (seeded; nothing is downloaded), eval mode, one 1x3x224x224 image. Audited by blocks (issue 37):
its 12 encoder layers are one structure, audited once on the layer fed the largest activations."""

import torch
import torchvision


def make() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The real-size model in eval mode and one image."""
    torch.manual_seed(0)
    model = torchvision.models.vit_b_16(weights=None).eval()
    return model, (torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1)),)
