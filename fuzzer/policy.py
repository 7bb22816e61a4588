"""A precision policy as a value: its record label, how a user writes it, and what the audit does with it.

Each backend declares its own policies beside its executors (fuzzer/executors/<backend>); the oracles and the
audit read them from the executor and the finding's evidence, never from a table of their own.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Policy:
    """How a configuration asks for its precision."""

    label: str  # the short name records carry ("bf16-model")
    words: str  # how a user writes it, for titles ("model.to(torch.bfloat16)")
    row: str  # the audit verdict's row label ("model.to(bfloat16)")
    moves_module_to: str | None = None  # model.to(dtype): the audit checks the module exported after the move

    def __str__(self) -> str:
        return self.label


DECLARED = Policy("declared", "the declared dtypes", "as given")
