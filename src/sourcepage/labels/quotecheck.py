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


def missing(quotes: Iterable[str], page_texts: Mapping[str, Iterable[str]]) -> list[tuple[str, list[str]]]:
    """Each quote with a sentence on none of ``page_texts``' pages (id → its texts: raw,
    cleaned), with those sentences; [] when every sentence is on one."""
    hay = [letters(t) for texts in page_texts.values() for t in texts]
    out = []
    for q in quotes:
        lost = [s for s in pieces(q) if not any(letters(s) in h for h in hay)]
        if lost:
            out.append((q, lost))
    return out


def pages_holding(sentence: str, page_texts: Mapping[str, Iterable[str]]) -> list[str]:
    """The pages of ``page_texts`` a sentence stands on."""
    needle = letters(sentence)
    return [p for p, texts in page_texts.items() if any(needle in letters(t) for t in texts)]


def _short(text: str, n: int = 90) -> str:
    return text if len(text) <= n else text[: n - 3].rsplit(" ", 1)[0] + "…"


def unsourced(
    quotes: Iterable[str],
    page_texts: Mapping[str, Iterable[str]],
    elsewhere: Mapping[str, Iterable[str]] | None = None,
) -> list[str]:
    """Every quote with a sentence on none of the accepted pages (``page_texts``: id → its
    texts), in words a reviewer reads, naming the page of ``elsewhere`` (the search's other
    pages) it is on when there is one; [] when each sentence is on an accepted page."""
    accepted = ", ".join(page_texts) or "none"
    problems = []
    for q, lost in missing(quotes, page_texts):
        whole = len(lost) == len(pieces(q))
        what = f"the quote “{_short(q)}”" if whole else f"the sentence “{_short(lost[0])}” of a quote"
        found = pages_holding(lost[0], elsewhere or {})
        where = f": it is on {', '.join(found)}" if found else ""
        problems.append(f"{what} is not on an accepted page ({accepted}){where}")
    return problems
