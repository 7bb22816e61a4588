"""Text bound for a terminal: every character that could move the cursor, clear the screen or hide text escaped."""

from __future__ import annotations


def _escape(c: str) -> str:
    """One character as it is printed: itself when printable, else its Python escape."""
    return c if c.isprintable() else repr(c)[1:-1]


def one_line(message: object) -> str:
    """`message` with every character that could break the line (or the terminal) escaped."""
    return "".join(_escape(c) for c in str(message))


def safe(text: object) -> str:
    """`text` with its line breaks kept and every other non-printable character (ESC, CR, bidi marks) escaped."""
    return "\n".join(one_line(line) for line in str(text).split("\n"))
