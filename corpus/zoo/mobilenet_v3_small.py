"""torchvision MobileNetV3-small at width 0.25 with the reduced tail, float32, random weights, one 1x3x32x32 image.

Config: the library's own small-architecture table (`_mobilenet_v3_conf("mobilenet_v3_small", width_mult=0.25,
reduced_tail=True)`) into `MobileNetV3`, 10 classes, eval mode (BatchNorm with randomized running
statistics); ~62k parameters. Ops met: conv2d (depthwise too), batch_norm, hardswish_, relu_,
squeeze-excitation (adaptive_avg_pool2d, hardsigmoid), in-place add_, flatten, linear, dropout (eval: identity).

Verdict of `precfuzz audit corpus/zoo/mobilenet_v3_small.py`: exit 1 (measured 2026-12-02 on main 0dc0a39, 2
shared cores at load 5-8: 194 s) with one TVM bug: under model.to(bfloat16), exported after the move, tvm/default's
bf16 batch_norm returns float32 (its float32 epsilon) and the next hardswish add raises (real: b14c676ef5).
Weights are random, made in code (seeded); nothing is downloaded.
"""

import torch
import torch.nn as nn
from torchvision.models.mobilenetv3 import MobileNetV3, _mobilenet_v3_conf


def make() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """MobileNetV3-small (width 0.25, reduced tail) in eval mode and one [1, 3, 32, 32] image."""
    torch.manual_seed(0)
    setting, last_channel = _mobilenet_v3_conf("mobilenet_v3_small", width_mult=0.25, reduced_tail=True)
    model = MobileNetV3(setting, last_channel, num_classes=10)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
    x = torch.randn(1, 3, 32, 32, generator=gen)
    return model.eval(), (x,)


def make_real() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """torchvision's mobilenet_v3_small at its default config (2.5M parameters), random weights, eval mode, one
    [1, 3, 224, 224] image (issue 37)."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v3_small(weights=None)
    return model.eval(), (torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1)),)
