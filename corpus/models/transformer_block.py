"""A pre-norm transformer block (layer_norm, two-head attention with softmax, MLP with GELU), float32, random weights.

Expected verdict of `precfuzz audit corpus/models/transformer_block.py` (exit 0): no model hazard and no
backend bug. Under model.to(bfloat16) the float32 input `x` meets bf16 layer_norm parameters: PyTorch raises
at the first op, which is an input cast the caller owes (reported as such, not as a hazard of the model);
with `x` passed as bfloat16 the block runs. Every policy and backend runs within its error bound.
Weights are random, made in code (seeded); nothing is downloaded.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """x + attn(ln1(x)); then x + mlp(ln2(x))."""

    def __init__(self, dim: int = 32, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.ln1(x)
        q = self.q(h).view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = self.k(h).view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = self.v(h).view(b, t, self.heads, d // self.heads).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5
        attn = torch.softmax(scores, dim=-1) @ v
        x = x + self.o(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def make() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The block in float32 and one [1, 8, 32] input."""
    torch.manual_seed(0)
    model = Block()
    x = torch.randn(1, 8, 32, generator=torch.Generator().manual_seed(1))
    return model, (x,)
