"""Answer / refuse / review: whether the retrieved pages support an answer.

Until a method is calibrated on development questions (study §4.4, §5.7: thresholds
are method-specific and never one global number), the decision is conservative:
``refuse`` when nothing was retrieved or no retrieved passage shares a content word
with the question, otherwise ``review``; and ``review`` whenever the top pages come
from more than one jurisdiction (study §3.1), whatever a score says.
"""

from __future__ import annotations

from collections.abc import Sequence

from sourcepage.records import Decision, Document


def jurisdictions(docs: Sequence[Document]) -> list[str]:
    """Distinct jurisdictions in rank order."""
    out: list[str] = []
    for d in docs:
        j = d.jurisdiction or "unknown"
        if j not in out:
            out.append(j)
    return out


def decide(
    method: str,
    top_docs: Sequence[Document],
    lexical_overlap: bool,
    threshold: float | None = None,
    top_score: float | None = None,
) -> Decision:
    """Decide from the top pages' documents, whether any passage shares a query word,
    and (when calibrated) the method's own threshold on its top score."""
    if not top_docs:
        return Decision("refuse", ("No page was retrieved for this question.",))
    if not lexical_overlap:
        return Decision("refuse", ("No retrieved passage shares a content word with the question.",))
    juris = jurisdictions(top_docs)
    if len(juris) > 1:
        return Decision(
            "review",
            (
                f"The top pages come from more than one jurisdiction "
                f"({', '.join(juris)}); requirements may differ.",
            ),
        )
    if threshold is None or top_score is None:
        return Decision(
            "review",
            (
                f"No calibrated answer threshold exists for {method} on this "
                "store yet; a reviewer should confirm the evidence.",
            ),
        )
    if top_score >= threshold:
        return Decision(
            "answer",
            (f"Top {method} score {top_score:.4g} is at or above the calibrated threshold {threshold:.4g}.",),
        )
    return Decision(
        "refuse",
        (
            f"Top {method} score {top_score:.4g} is below the calibrated threshold "
            f"{threshold:.4g}: the documents probably do not answer this.",
        ),
    )
