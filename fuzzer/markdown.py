"""Case data in Markdown: node ids, value names, messages and titles come from case files and records a user may have
written, so each is made inert text before it lands in report.md or a bug-report draft."""

from __future__ import annotations

import re

_SPECIAL = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|", "`": "\\`"}


def text(value: object) -> str:
    """One line of inert Markdown: whitespace runs (newlines too) become one space, HTML and table, link and code
    delimiters are escaped, so no heading, row break, tag or link can come from the data."""
    flat = " ".join(str(value).split())
    return "".join(_SPECIAL.get(c, c) for c in flat).replace("](", "]\\(")  # no inline link either


def code(value: object, cell: bool = False) -> str:
    """An inline code span holding `value` on one line (delimited by more backticks than it holds); in a table
    `cell`, its pipes escaped (GFM splits cells at a bare pipe even inside a code span)."""
    flat = " ".join(str(value).split())
    if cell:
        flat = flat.replace("|", "\\|")
    run = max((len(m) for m in re.findall(r"`+", flat)), default=0)
    tick = "`" * (run + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{tick}{pad}{flat}{pad}{tick}"


def fence(body: str, lang: str = "") -> str:
    """A fenced block holding `body` verbatim (the fence is longer than any backtick run inside it)."""
    run = max((len(m) for m in re.findall(r"`{3,}", body)), default=0)
    tick = "`" * max(3, run + 1)
    return f"{tick}{lang}\n{body.rstrip()}\n{tick}"
