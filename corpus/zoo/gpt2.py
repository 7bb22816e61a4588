"""transformers GPT-2 (GPT2LMHeadModel: learned positions, pre-norm blocks with Conv1D projections, causal SDPA
attention, gelu_new MLP, tied LM head), tiny config, float32, random weights, one sequence of 12 token ids.

Config: `GPT2Config(vocab_size=256, n_positions=64, n_embd=64, n_layer=2, n_head=4)`, attn_implementation
"sdpa" (the default), the KV cache left on as a user calls it (`model(ids).logits`: transformers'
DynamicCache starts each layer's keys and values as `torch.tensor([])`, which torch.export lifts to empty
constants `<attn>.lifted_tensor_<k>` that torch.cat skips); forward returns the logits; ~121k parameters.

Verdict of `precfuzz audit corpus/zoo/gpt2.py`: exit 1 (measured 2026-12-02 on main 0dc0a39, 2 shared
cores at load 5-8: 200 s) with one TVM bug: under model.to(bfloat16), exported after the move, tvm/decompose's
attention returns float32 (its explicit float32 scale) and the next `pow` raises (real: bbf14ee65e). The false
model.to(bfloat16) hazard of 2026-12-01 (float32 baked into `position_embeds.to(inputs_embeds.device)` by export)
is gone: the module exported after the move is what that policy runs.
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


def make_real() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The library's default config, `GPT2Config()` (gpt2: 12 layers, 768 wide, vocab 50257; 124M parameters),
    random weights, one [1, 16] sequence (issue 37)."""
    torch.manual_seed(0)
    model = Logits(GPT2LMHeadModel(GPT2Config()))
    ids = torch.randint(0, 50257, (1, 16), generator=torch.Generator().manual_seed(1))
    return model.eval(), (ids,)
