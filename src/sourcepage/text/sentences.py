"""The sentence splitter shared by the sentence reranker, the answerability features and
the extractive answers (one definition, so a quoted sentence is the unit that was scored)."""

from __future__ import annotations

import re

_SENT = re.compile(r"(?<=[.!?;])\s+(?=[A-Z0-9•■(\"'])|\s*[•■]\s+")


def split_sentences(text: str) -> list[str]:
    """Sentences of a passage (whitespace collapsed; bullets split), 30–600 characters."""
    flat = re.sub(r"\s+", " ", text).strip()
    return [s.strip() for s in _SENT.split(flat) if 30 <= len(s.strip()) <= 600]
