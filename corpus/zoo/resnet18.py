"""torchvision ResNet-18 (BasicBlock, layers [2, 2, 2, 2]) at 1/8 width, float32, random weights, one 1x3x32x32 image.

Config: the library's ResNet with stem and stage widths 8/8/16/32/64 instead of 64/64/128/256/512 (the
class hard-codes them, so a subclass sets `inplanes` and stage widths and reuses its `_make_layer`, blocks and
`forward`), 10 classes, eval mode (BatchNorm with randomized running statistics); ~176k parameters.
Ops met: conv2d, batch_norm, relu_, max_pool2d, in-place add_, adaptive_avg_pool2d, flatten, linear.

Verdict of `precfuzz audit corpus/zoo/resnet18.py`: exit 0, clean (measured 2026-12-01 on main de8e5c1, 2
shared cores at load 3.5: 86 s). Under model.to(bfloat16) the float32 image is an input cast the caller owes
(eager raises at conv1; xla/bf16-model fails in XLA's HLO verifier on a batch-norm-inference of mixed float
precisions instead of a dtype error); with `x` as bfloat16 it runs.
Weights are random, made in code (seeded); nothing is downloaded.
"""

import torch
import torch.nn as nn
from torchvision.models.resnet import BasicBlock, ResNet


class TinyResNet18(ResNet):
    """ResNet-18's layout at `width` channels in the stem (the library's blocks and forward)."""

    def __init__(self, width: int = 8, num_classes: int = 10) -> None:
        nn.Module.__init__(self)
        self._norm_layer = nn.BatchNorm2d
        self.inplanes, self.dilation, self.groups, self.base_width = width, 1, 1, 64
        self.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(BasicBlock, width, 2)
        self.layer2 = self._make_layer(BasicBlock, 2 * width, 2, stride=2)
        self.layer3 = self._make_layer(BasicBlock, 4 * width, 2, stride=2)
        self.layer4 = self._make_layer(BasicBlock, 8 * width, 2, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(8 * width * BasicBlock.expansion, num_classes)


def make() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The shrunk ResNet-18 in eval mode and one [1, 3, 32, 32] image."""
    torch.manual_seed(0)
    model = TinyResNet18()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):  # trained-looking statistics, not the (0, 1) of a fresh layer
                m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
    x = torch.randn(1, 3, 32, 32, generator=gen)
    return model.eval(), (x,)


def loss(logits: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
    """Cross-entropy in float32 against class 3 (`precfuzz audit --train`, the training zoo), written out as
    log-softmax and the picked log-probability."""
    return -logits.float().log_softmax(dim=-1)[:, 3].mean()


# Real size (issue 37): torchvision's default resnet18 (11.7M parameters) is corpus/scale/resnet18.py, audited there.
REAL_SIZE = "corpus/scale/resnet18.py is this model at its default config"
