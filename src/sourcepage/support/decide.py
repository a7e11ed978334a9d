"""Answer / refuse / review: whether the retrieved pages support an answer.

With a policy (the shipped default, or one calibrated on the store; thresholds per
method pair, never one global number — study §4.4, §5.7) the classifier's probability
decides, asymmetrically: below ``t_refuse`` refuse; at or above ``t_answer`` (set so
that development questions without an answer in the documents are not reached) answer;
in between refer to a reviewer. Whatever the probability, cross-jurisdiction evidence
(study §3.1) and a sparse/semantic conflict (each method's top page absent from the
other's ranking) go to a reviewer rather than to an answer. Every verdict names the
features that drove it (``drivers``), in words. Last, ``gate`` keeps an ``answer`` only
when a quote states the answer (the learned selector's P(states) over its threshold).

Without any usable policy the decision is conservative: ``refuse`` when nothing was
retrieved or no top passage shares a content word with the question, else ``review``.

``Decider`` is the one interface the search pipeline, ``sourcepage eval`` and
``sourcepage calibrate`` read: a store's policy, its thresholds in force
(``thresholds``: the shipped policy answers from the threshold fitted with the quote
model's), the verdict inputs of a feature row (``calibrate``), the jurisdiction and
comparison rules (``decide``) and the quote gate (``gate``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sourcepage.query import PageHit, Query
from sourcepage.records import Decision, Document
from sourcepage.retrieval.parsed import Route
from sourcepage.retrieval.routing import legal_jurisdiction
from sourcepage.support.check import check_answer
from sourcepage.support.features import FEATURE_WORDS
from sourcepage.support.policy import Policy
from sourcepage.support.select import quote_model


@dataclass(frozen=True)
class Calibration:
    """A policy's verdict inputs for one question."""

    probability: float
    t_refuse: float
    t_answer: float
    policy: str  # Policy.describe(), e.g. "the shipped default policy (bm25 + dense, …)"
    drivers_for: tuple[str, ...] = ()  # features that pushed towards answering, in words
    drivers_against: tuple[str, ...] = ()  # … towards refusing
    conflicting: bool = False
    max_answerable_refused: float = 0.05


def feature_phrase(name: str, value: float, reference: Mapping[str, float] | None = None) -> str:
    """One feature in words, with the development means when known, e.g. "meaning
    similarity of the single closest sentence to the question: 0.79 (answerable
    development questions average 0.86, unsupported and out-of-domain ones 0.80)"."""
    if name == "value_missing":
        if value >= 0.5:
            return FEATURE_WORDS[name]
        return (
            "no value the question asks for (a number, duration, frequency …) is missing from "
            "the closest sentences"
        )
    if name in ("rr_a_in_b", "rr_b_in_a"):
        shown = f"{round(1 / value)}" if value > 0 else "not in the top 20"
    else:
        shown = f"{value:.2f}"
    ref = ""
    if reference:
        ref = (
            f" (answerable development questions average {reference['answerable']:.2f}, "
            f"unsupported and out-of-domain ones {reference['negative']:.2f})"
        )
    return f"{FEATURE_WORDS[name]}: {shown}{ref}"


#: a feature is named as a driver only when it moves the log-odds by at least this much
MIN_DRIVER = 0.25


def drivers(
    contributions: Mapping[str, float],
    values: Mapping[str, float],
    reference: Mapping[str, Mapping[str, float]],
    n: int = 2,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The (at most ``n``) features that pushed the log-odds most towards answering and
    towards refusing — by at least ``MIN_DRIVER`` — each as a phrase (``feature_phrase``).

    A feature with development means (``reference``) is named only on the side its value
    lies: "for" when it is nearer the answerable questions' mean than the negatives', "against"
    when nearer the negatives'. Correlated features give the logistic model suppressor
    weights (given the passage share, a high sentence word share lowers the log-odds), and
    "Against: share of the question's words found in its three closest sentences: 1.00
    (answerable development questions average 0.39 …)" reads as nonsense to a person; such a
    push is left unnamed (the probability still counts it)."""
    order = sorted(contributions, key=lambda f: (contributions[f], f))
    against = [f for f in order if contributions[f] <= -MIN_DRIVER and _side(f, values, reference) <= 0][:n]
    for_ = [
        f for f in reversed(order) if contributions[f] >= MIN_DRIVER and _side(f, values, reference) >= 0
    ][:n]
    return (
        tuple(feature_phrase(f, values[f], reference.get(f)) for f in for_),
        tuple(feature_phrase(f, values[f], reference.get(f)) for f in against),
    )


def _side(name: str, values: Mapping[str, float], reference: Mapping[str, Mapping[str, float]]) -> int:
    """+1 when ``name``'s value is nearer its answerable development mean than its negative
    one, −1 when nearer the negative one, 0 without means (or on the midpoint)."""
    ref = reference.get(name)
    if not ref or name not in values:
        return 0
    a, neg = ref["answerable"], ref["negative"]
    v = values[name]
    return (abs(v - neg) > abs(v - a)) - (abs(v - a) > abs(v - neg))


def jurisdictions(docs: Sequence[Document]) -> list[str]:
    """Distinct jurisdictions in rank order."""
    out: list[str] = []
    for d in docs:
        j = d.jurisdiction or "unknown"
        if j not in out:
            out.append(j)
    return out


def spans_jurisdictions(sources: Sequence[tuple[str, str]], compares: bool = False) -> bool:
    """True when pages of the documents ``sources`` ((jurisdiction, authority) each) must
    not carry one answer (study §3.1): they come from several jurisdictions, unless those
    state one text — a state code that its manifest says is based on the national model
    code beside the national one (``routing.legal_jurisdiction``); and always when the
    question names several jurisdictions to compare them (``Route.compares``)."""
    codes = {j or "unknown" for j, _ in sources}
    if len(codes) < 2:
        return False
    return compares or len({legal_jurisdiction(j or "unknown", a) for j, a in sources}) > 1


def _list(phrases: Sequence[str]) -> str:
    return "; ".join(phrases)


def decide(
    method: str,
    top_docs: Sequence[Document],
    lexical_overlap: bool,
    calibration: Calibration | None = None,
    no_policy: str = "",
    uncovered: Sequence[str] = (),
    covered: Sequence[str] = (),
    compares: bool = False,
) -> Decision:
    """Decide from the top pages' documents, lexical overlap and (if any) a policy's
    verdict inputs; ``no_policy`` says why there is none (for the review reason).
    ``uncovered``: jurisdictions the question names that no document of the corpus is from
    (``covered`` lists those that are); such a question is refused with that reason.
    ``compares``: the question names jurisdictions to compare (``Route.compares``): it always
    goes to a reviewer, its top pages from one jurisdiction or several (study §3.1)."""
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
    if spans_jurisdictions([(d.jurisdiction, d.authority) for d in top_docs], compares):
        cross: str | None = (
            f"The top pages come from more than one jurisdiction ({', '.join(juris)}); "
            "requirements may differ and must not be merged."
        )
    elif compares:  # the top pages are one side's: the quotes bring each named side's page
        cross = (
            f"The question compares jurisdictions, but the top pages are all from {', '.join(juris)}; "
            "a reviewer sets each jurisdiction's requirement beside the other's (they must not be merged)."
        )
    else:
        cross = None
    # a state code that adopts the national model code states the national text: no
    # conflict; each quote names its own jurisdiction, and the reasons say so
    within = (
        f"The top pages come from {', '.join(juris)}: documents that adopt the national model "
        "code state its text; each quote names its own jurisdiction."
        if len(juris) > 1 and not cross
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
                no_policy
                or f"No answer policy is available for {method} on this store; a reviewer should "
                "confirm the evidence.",
            ),
        )
    c = calibration
    p = f"P(supported) = {c.probability:.2f} from {c.policy}"
    if c.probability < c.t_refuse:
        return Decision(
            "refuse",
            (
                f"{p} is below the refusal threshold {c.t_refuse:.2f} (set so that at most "
                f"{c.max_answerable_refused:.0%} of the answerable development questions are refused): "
                "the documents probably do not support an answer.",
                *((f"Against: {_list(c.drivers_against)}.",) if c.drivers_against else ()),
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
            f"{c.t_answer:.2f} (no unsupported development question reached it): uncertain."
        )
    detail = tuple(
        s
        for s in (
            f"For: {_list(c.drivers_for)}." if c.drivers_for else "",
            f"Against: {_list(c.drivers_against)}." if c.drivers_against else "",
        )
        if s
    )
    if reasons:
        return Decision("review", (*reasons, *((within,) if within else ()), *detail))
    return Decision(
        "answer",
        (
            f"{p} is at or above the answer threshold {c.t_answer:.2f}; the evidence pages are accepted.",
            *((within,) if within else ()),
            *detail,
        ),
    )


def gate(query: Query, answer: Mapping[str, Any], decision: Decision) -> tuple[dict[str, Any], Decision]:
    """The last step of a decision: check the extractive answer (``extract_answer``'s dict;
    its ``check`` is set, ``support.check.check_answer``) and keep an ``answer`` decision
    only when a quote states the answer — its P(states), from the learned selector, is
    over the selector's threshold (``fact_found``). Otherwise the decision becomes
    ``review`` with that reason first, and the quotes a draft for the reviewer. A refusal
    is returned as it is (it quotes nothing)."""
    if decision.decision == "refuse":
        return dict(answer), decision
    verdict = check_answer(query, answer)
    checked = {**answer, "check": verdict}
    if decision.decision != "answer" or verdict["supported"]:
        return checked, decision
    checked["status"] = "draft for review" if checked.get("quotes") else "none"
    reason = (
        f"No quoted sentence is likely enough to state the answer; a reviewer should confirm the answer "
        f"before anyone relies on it. {verdict['summary']}"
    )
    return checked, Decision("review", (reason, *decision.reasons))


def thresholds(policy: Policy) -> tuple[float, float]:
    """(t_refuse, t_answer) in force for ``policy``: the shipped default answers from the
    P(supported) threshold fitted together with the quote threshold (``support.select``:
    an answer needs a stating quote besides P(supported)); a calibrated policy from its own."""
    qm = quote_model()
    if qm is not None and policy.origin == "default":
        return policy.t_refuse, max(qm.t_support, policy.t_refuse)
    return policy.t_refuse, policy.t_answer


def verdict(probability: float, t_refuse: float, t_answer: float) -> str:
    """The threshold part of a decision: answer at or above ``t_answer``, refuse below
    ``t_refuse``, review in between."""
    return "answer" if probability >= t_answer else "review" if probability >= t_refuse else "refuse"


@dataclass(frozen=True)
class Decider:
    """The decision of one store and text version: its answer ``policy`` (None: the rule
    without a policy, ``note`` says why), the jurisdiction codes its corpus ``covers``;
    read alike by the search pipeline, ``sourcepage eval`` and ``sourcepage calibrate``."""

    policy: Policy | None
    note: str = ""
    covers: tuple[str, ...] = ()

    def thresholds(self) -> tuple[float, float]:
        """(t_refuse, t_answer) in force (``thresholds``); (−inf, inf) without a policy."""
        return thresholds(self.policy) if self.policy is not None else (-math.inf, math.inf)

    def verdicts(self, rows: Sequence[Mapping[str, float]]) -> list[str]:
        """The threshold part of the decision of each feature row (no jurisdiction rule)."""
        if self.policy is None or not rows:
            return []
        t_refuse, t_answer = self.thresholds()
        return [verdict(float(p), t_refuse, t_answer) for p in self.policy.classifier.predict(rows)]

    def calibrate(self, feats: Mapping[str, float]) -> Calibration | None:
        """The policy's verdict inputs of one question's feature row (None without a policy)."""
        pol = self.policy
        if pol is None:
            return None
        prob, shares = pol.classifier.explain(feats)
        pro, con = drivers(shares, feats, pol.reference)
        t_refuse, t_answer = self.thresholds()
        return Calibration(
            prob,
            t_refuse,
            t_answer,
            pol.describe(),
            pro,
            con,
            conflicting=feats["rr_a_in_b"] == 0 and feats["rr_b_in_a"] == 0,
            max_answerable_refused=pol.max_answerable_refused,
        )

    def decide(
        self, method: str, top: Sequence[PageHit], cal: Calibration | None, route: Route, unusable: str = ""
    ) -> Decision:
        """The decision on the top pages before the quote gate: a named jurisdiction the
        corpus lacks is refused, a comparison goes to a reviewer (``decide``)."""
        return decide(
            method,
            [p.document for p in top],
            any(p.highlights for p in top),
            cal,
            uncovered=route.uncovered if not route.jurisdictions else (),
            covered=self.covers,
            compares=route.compares,
            no_policy=unusable or self.note,
        )

    def gate(
        self, query: Query, answer: Mapping[str, Any], decision: Decision
    ) -> tuple[dict[str, Any], Decision]:
        """The quote gate (``gate``): an answer stands only on a quote that states it."""
        return gate(query, answer, decision)
