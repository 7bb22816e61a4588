"""Where a value of an audited model came from in the user's code (and the library line that made it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Source:
    """Where a graph value came from in the user's code."""

    file: str
    line: int
    code: str
    module: str = ""  # the submodule that made it (`proj (Conv3d)`), where one did
    aten: str = ""  # the ATen op of the exported graph
    library: str = ""  # the library line that made it (`transformers/models/gpt2/modeling_gpt2.py:208`), where the
    # value is made inside a library the user's code called; `file`/`line` are then the user's call site

    def where(self) -> str:
        """`denoiser.py:41`, or `transformers/.../modeling_gpt2.py:208 (called at gpt2.py:30)` inside a library."""
        name = self.file.split("/site-packages/", 1)[1] if "/site-packages/" in self.file else Path(self.file).name
        own = f"{name}:{self.line}" if self.file else "?"
        return f"{self.library} (called at {own})" if self.library else own
