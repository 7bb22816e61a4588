"""A Llama-style decoder of about 1B parameters at its real size (issue 37): transformers LlamaForCausalLM with
TinyLlama-1.1B's shape (hidden 2048, 22 layers, 32 query heads and 4 key/value heads, SwiGLU MLP 5632 wide, a
32000-token vocabulary, untied lm_head: 1.10B parameters), random weights (seeded; nothing is downloaded), eval
mode, one sequence of 16 token ids; forward returns the logits. Audited by blocks: `precfuzz audit
corpus/scale/llama_1b.py`; `make bench BENCH_SCALE=1` measures it."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402


class Logits(nn.Module):
    """A causal LM whose forward returns the logits tensor (not the output dict)."""

    def __init__(self, lm: nn.Module) -> None:
        super().__init__()
        self.lm = lm

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.lm(input_ids=input_ids, use_cache=False).logits


def make() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The 1.1B decoder in eval mode and one [1, 16] int64 sequence."""
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                         num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048,
                         rms_norm_eps=1e-5, tie_word_embeddings=False)
    model = Logits(LlamaForCausalLM(config))
    ids = torch.randint(0, 32000, (1, 16), generator=torch.Generator().manual_seed(1))
    return model.eval(), (ids,)
