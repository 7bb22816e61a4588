"""transformers Llama (LlamaForCausalLM: RMSNorm, rotary embeddings, grouped-query SDPA attention with a causal
mask, SwiGLU MLP), tiny config, float32, random weights, one sequence of 12 token ids.

Config: `LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)`, attn_implementation "sdpa"
(the default), the KV cache left on as a user calls it (`model(ids).logits`: transformers'
DynamicCache starts each layer's keys and values as `torch.tensor([])`, which torch.export lifts to empty
constants `<attn>.lifted_tensor_<k>` that torch.cat skips); forward returns the logits; ~107k parameters.

Verdict of `precfuzz audit corpus/zoo/llama.py`: exit 1 (measured 2026-12-01 on main de8e5c1, 2 shared
cores at load 3.5: 70 s) with two model hazards. Under model.to(bfloat16) at `q_proj`: a false alarm (the real
`model.to(torch.bfloat16)(ids)` runs; export bakes float32 into LlamaRMSNorm's `hidden_states.to(input_dtype)`).
Under autocast(bfloat16) on torch_xla at scaled_dot_product_attention: real (checked: torch_xla's autocast raises
`Expected query, key, and value to have the same dtype` on this model, query and key float32 from the rotary
arithmetic, value bf16 from an autocast linear; CPU autocast runs), though the audit names no culprit (`0`) and
proposes a cast to an int64 arange's dtype.
Weights are random, made in code (seeded); nothing is downloaded (HF_HUB_OFFLINE=1).
"""

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
        return self.lm(input_ids=input_ids).logits


def make() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The tiny Llama in eval mode and one [1, 12] int64 sequence."""
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = Logits(LlamaForCausalLM(config))
    ids = torch.randint(0, 256, (1, 12), generator=torch.Generator().manual_seed(1))
    return model.eval(), (ids,)


def loss(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy in float32 (`precfuzz audit --train`, the training zoo): log-softmax and the picked
    log-probability written out (what F.cross_entropy computes), token t predicting token t + 1."""
    logp = logits[:, :-1].float().log_softmax(dim=-1)
    return -logp.gather(-1, ids[:, 1:].unsqueeze(-1)).mean()


# Real size (issue 37): `LlamaConfig()`'s default is Llama-2-7B (6.7B parameters, 27 GB in float32), past the 16 GB an
# audit at scale may take; corpus/scale/llama_1b.py audits the family at 1.1B (TinyLlama's shape).
REAL_SIZE = "LlamaConfig() is 7B (27 GB of float32 weights): see corpus/scale/llama_1b.py"
