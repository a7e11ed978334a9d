"""A reviewer's quotes are checked against the pages the reviewer accepted before a decision
is published: each quoted sentence must stand on one of them.

The trap this closes (issue 49): a reviewer corrects the answer but leaves the system's page
ticked, and the published answer cites a page that does not say what it quotes. A sentence
is compared on its letters and digits only (case, white space, punctuation, hyphenation at
a line end and ligatures set aside), so a sentence copied from the page image or the
cleaned text is found in the raw text too; a quote shortened with an ellipsis ("…", "...",
"[…]") is checked piece by piece.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping

#: where a quote is cut into the pieces checked: a sentence end, or an ellipsis
_PIECES = re.compile(r"\[\s*(?:…|\.\.\.)\s*\]|…|\.{3,}|(?<=[.!?;])\s+")
#: a piece with fewer letters and digits than this ("(a)", "2.") is not checked alone
MIN_CHARS = 8


def letters(text: str) -> str:
    """The letters and digits of a text, lower case, ligatures unfolded (NFKC)."""
    return "".join(c for c in unicodedata.normalize("NFKC", text).lower() if c.isalnum())


def pieces(quote: str) -> list[str]:
    """The sentences (and ellipsis-separated parts) of a quote that are checked."""
    out = [p.strip(" \"'“”‘’«»") for p in _PIECES.split(quote)]
    return [p for p in out if len(letters(p)) >= MIN_CHARS]


def unsourced(quotes: Iterable[str], page_texts: Mapping[str, Iterable[str]]) -> list[str]:
    """Every quoted sentence found on none of the accepted pages, in words a reviewer reads
    ([] when each is on one). ``page_texts``: each accepted page id and its texts (raw,
    cleaned)."""
    hay = [letters(t) for texts in page_texts.values() for t in texts]
    pages = ", ".join(page_texts) or "none"
    problems = []
    for q in quotes:
        for s in pieces(q):
            if not any(letters(s) in h for h in hay):
                short = s if len(s) <= 120 else s[:117].rsplit(" ", 1)[0] + "…"
                problems.append(f"the quoted sentence “{short}” is not on an accepted page ({pages})")
    return problems
