"""transformers GPT-2 (GPT2LMHeadModel: learned positions, pre-norm blocks with Conv1D projections, causal SDPA
attention, gelu_new MLP, tied LM head), tiny config, float32, random weights, one sequence of 12 token ids.

Config: `GPT2Config(vocab_size=256, n_positions=64, n_embd=64, n_layer=2, n_head=4)`, attn_implementation
"sdpa" (the default), the KV cache left on (the
default, as a user calls it: its empty initial key/value tensors are lifted constants); forward returns the logits; ~120k parameters.

Expected verdict of `precfuzz audit corpus/zoo/gpt2.py`: translates; verdict pending op records
(issue 22: embedding, arange, split, scaled_dot_product_attention, addmm-style Conv1D, pow/tanh gelu).
Weights are random, made in code (seeded); nothing is downloaded (HF_HUB_OFFLINE=1).
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402


class Logits(nn.Module):
    """A causal LM whose forward returns the logits tensor (not the output dict)."""

    def __init__(self, lm: nn.Module) -> None:
        super().__init__()
        self.lm = lm

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.lm(input_ids=input_ids).logits


def make() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The tiny GPT-2 in eval mode and one [1, 12] int64 sequence."""
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=256, n_positions=64, n_embd=64, n_layer=2, n_head=4)
    model = Logits(GPT2LMHeadModel(config))
    ids = torch.randint(0, 256, (1, 12), generator=torch.Generator().manual_seed(1))
    return model.eval(), (ids,)
