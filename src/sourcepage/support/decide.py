"""Answer / refuse / review: whether the retrieved pages support an answer.

With a calibrated policy (``sourcepage calibrate``; thresholds per text version and
method pair, never one global number — study §4.4, §5.7) the classifier's probability
decides: below ``t_refuse`` refuse, at or above ``t_answer`` answer, in between refer to
a reviewer. Whatever the probability, cross-jurisdiction evidence (study §3.1) and a
sparse/semantic conflict (each method's top page absent from the other's ranking) go to
a reviewer rather than to an answer.

Without a policy the decision is conservative: ``refuse`` when nothing was retrieved or
no top passage shares a content word with the question, otherwise ``review``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sourcepage.records import Decision, Document


@dataclass(frozen=True)
class Calibration:
    """A calibrated policy's verdict inputs for one question."""

    probability: float
    t_refuse: float
    t_answer: float
    target_recall: float
    n_dev: int  # answerable development questions the recall target was set on
    pair: str  # e.g. "bm25 + dense on raw"
    conflicting: bool = False


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
    calibration: Calibration | None = None,
    uncovered: Sequence[str] = (),
    covered: Sequence[str] = (),
) -> Decision:
    """Decide from the top pages' documents, lexical overlap and (if any) a calibration.
    ``uncovered``: jurisdictions the question names that no document of the corpus is from
    (``covered`` lists those that are); such a question is refused with that reason."""
    if uncovered:
        return Decision(
            "refuse",
            (
                f"The question names {', '.join(uncovered)}, but no document in this corpus is from "
                f"there (the corpus covers {', '.join(covered) or 'no named jurisdiction'}): its pages "
                "cannot support an answer for that jurisdiction.",
            ),
        )
    if not top_docs:
        return Decision("refuse", ("No page was retrieved for this question.",))
    juris = jurisdictions(top_docs)
    cross = (
        (
            f"The top pages come from more than one jurisdiction ({', '.join(juris)}); "
            "requirements may differ and must not be merged."
        )
        if len(juris) > 1
        else None
    )
    if calibration is None:
        if not lexical_overlap:
            return Decision("refuse", ("No retrieved passage shares a content word with the question.",))
        if cross:
            return Decision("review", (cross,))
        return Decision(
            "review",
            (
                f"No calibrated answer policy exists for {method} on this store yet "
                "(run `sourcepage calibrate`); a reviewer should confirm the evidence.",
            ),
        )
    c = calibration
    p = f"P(answerable) = {c.probability:.2f} from the {c.pair} classifier"
    if c.probability < c.t_refuse:
        return Decision(
            "refuse",
            (
                f"{p} is below the refusal threshold {c.t_refuse:.2f} (calibrated to "
                f"answer ≥ {c.target_recall:.0%} of the {c.n_dev} answerable development "
                "questions): the documents probably do not "
                "support an answer.",
            ),
        )
    reasons = []
    if cross:
        reasons.append(cross)
    if c.conflicting:
        reasons.append(
            "Sparse and semantic retrieval disagree: neither method's top page appears in "
            "the other's ranking."
        )
    if c.probability < c.t_answer:
        reasons.append(
            f"{p} is between the refusal threshold {c.t_refuse:.2f} and the answer threshold "
            f"{c.t_answer:.2f}: low confidence."
        )
    if reasons:
        return Decision("review", tuple(reasons))
    return Decision(
        "answer",
        (f"{p} is at or above the answer threshold {c.t_answer:.2f}; the evidence pages are accepted.",),
    )


def require_fact(decision: Decision, answer: Mapping[str, Any]) -> Decision:
    """An ``answer`` decision stands only when a quoted sentence states the kind of fact
    the question asks for (``answer["fact_found"]``, support.answer); otherwise the
    question goes to a reviewer, with the reason added."""
    if decision.decision != "answer" or answer.get("fact_found"):
        return decision
    asked = answer.get("asked") or "the asked fact"
    return Decision(
        "review",
        (
            *decision.reasons,
            f"No sentence of the top pages states what the question asks ({asked}): a reviewer "
            "should confirm the answer before anyone relies on it.",
        ),
    )
