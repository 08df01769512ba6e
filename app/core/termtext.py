"""Text from a job, made safe to show on a terminal (issue 14.10)."""

from __future__ import annotations


def safe_text(text: str) -> str:
    """Placeholder: not written yet (the test comes first)."""
    return text
