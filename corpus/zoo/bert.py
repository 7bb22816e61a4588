"""transformers BERT (BertModel: word + position + token-type embeddings, post-norm encoder with SDPA attention
under a padding mask, gelu MLP), tiny config, float32, random weights, a 12-token sequence with 3 padded.

Config: `BertConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
intermediate_size=128, max_position_embeddings=64)`, attn_implementation "sdpa" (the default), no pooler;
forward(input_ids, attention_mask) returns the last hidden state; ~88k parameters.

Verdict of `precfuzz audit corpus/zoo/bert.py`: exit 0, clean (measured 2026-12-01 on main de8e5c1, 2
shared cores at load 3.5: 118 s). Every policy and backend runs within its bound; the int64 ids and mask need no
cast under model.to(bfloat16).
Weights are random, made in code (seeded); nothing is downloaded (HF_HUB_OFFLINE=1).
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from transformers import BertConfig, BertModel  # noqa: E402


class Hidden(nn.Module):
    """An encoder whose forward returns the last hidden state tensor (no output dict)."""

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def make() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The tiny BERT in eval mode, one [1, 12] int64 sequence and its mask (the last 3 tokens padding)."""
    torch.manual_seed(0)
    config = BertConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=64)
    model = Hidden(BertModel(config, add_pooling_layer=False))
    ids = torch.randint(0, 256, (1, 12), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(1, 12, dtype=torch.int64)
    mask[:, 9:] = 0
    return model.eval(), (ids, mask)


def make_real() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The library's default config, `BertConfig()` (bert-base: 12 layers, hidden 768, vocab 30522; 109M
    parameters), random weights, one [1, 16] sequence with its last 4 tokens padding (issue 37)."""
    torch.manual_seed(0)
    model = Hidden(BertModel(BertConfig(), add_pooling_layer=False))
    ids = torch.randint(0, 30522, (1, 16), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(1, 16, dtype=torch.int64)
    mask[:, 12:] = 0
    return model.eval(), (ids, mask)
