"""torchvision resnet18 at its real size (the library's default config: 11.7M parameters), random weights (seeded;
nothing is downloaded), eval mode, one 1x3x224x224 image. Audited by blocks (issue 37): `precfuzz audit
corpus/scale/resnet18.py`; `make bench BENCH_SCALE=1` measures it."""

import torch
import torchvision


def make() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The real-size model in eval mode and one image."""
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    return model, (torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1)),)
