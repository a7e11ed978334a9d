"""Answer checking: which parts of a question the quoted sentences cover, and which not.

An extractive answer quotes sentences; this module says, for a reviewer and for the
decision, whether those sentences actually answer the question:

- **supported**: the quotes are likely enough to state the answer (the answer's
  ``fact_found``, from the learned selector ``support.select``) and, when the question
  asks for a value, a quote states a value of that kind by the pattern rules of
  ``text.facts`` (a number with a matching unit, a frequency word, a colour word;
  ``asked``): a fee asked is not answered by a time limit quoted, nor a number of years by
  "1 or more of the following" (the value-asked rule; the development pool's unsupported
  questions mostly ask for a figure the documents never give).
- **question parts**: the question is cut into parts at commas, semicolons, colons and
  "and"/"or" between clauses; a part is covered when most of its content words
  (idf-weighted, stemmed) appear in the quotes.
- **answer points** (evaluation only): the same coverage test, per labelled answer point
  of a benchmark question, plus every number of the point appearing in the quotes.

The parts and points are rules: a reviewer can verify them by reading the quotes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sourcepage.query import question_parts, weighted_terms
from sourcepage.retrieval.tokenize import TokenizerConfig, tokenize
from sourcepage.text.facts import numbers, states
from sourcepage.text.roles import plural

if TYPE_CHECKING:
    from sourcepage.query import Query

__all__ = ["PART_COVERAGE", "check_answer", "coverage", "point_covered", "question_parts", "weighted_terms"]

_STEMMED = TokenizerConfig(stopwords=True, stem=True)

#: share of a part's idf-weighted content words the quotes must hold for it to count as covered
PART_COVERAGE = 0.5


def coverage(text: str, quotes: str, weights: Mapping[str, float] | None = None) -> tuple[float, list[str]]:
    """(idf-weighted share of ``text``'s content words found in ``quotes``, the missing
    stems), matching on Snowball stems so "slicing" meets "slice"."""
    return coverage_of(weighted_terms(text, weights), quote_stems(quotes))


def quote_stems(quotes: str) -> frozenset[str]:
    """The Snowball stems of the words of ``quotes`` (what ``coverage_of`` looks in)."""
    return frozenset(tokenize(quotes, _STEMMED))


def coverage_of(terms: Mapping[str, float], have: frozenset[str]) -> tuple[float, list[str]]:
    """(weighted share of ``terms`` — stem → weight, ``weighted_terms`` — among the stems
    ``have``, the missing stems)."""
    total = sum(terms.values())
    if not total:
        return 1.0, []
    missing = [t for t in terms if t not in have]
    return 1.0 - sum(terms[t] for t in missing) / total, missing


def check_answer(query: Query, answer: Mapping[str, Any]) -> dict[str, Any]:
    """What the quotes of ``answer`` (``support.answer.extract_answer``'s dict) cover of
    the question, read from its ``Query`` (its parts with their weighted stems and its
    asked value, parsed once).

    Returns ``{"supported", "complete", "asked": {"kind", "phrase", "stated"} | None,
    "parts": [{"text", "covered", "coverage", "missing"}], "summary"}``. ``supported``: the
    quotes state the answer by the selector (``fact_found``) and, when a value is asked, a
    quote states one of its kind (``asked.stated``, by the pattern rules) — the condition
    for an automatic answer (``support.decide.gate``). ``complete``: supported
    and every part covered (parts are cut by rule, so an uncovered part is a pointer for
    the reviewer, not a verdict)."""
    asked = query.value
    quotes = [q["text"] for q in answer.get("quotes", [])]
    text = " ".join(quotes)
    have = quote_stems(text)
    parts = []
    for p, terms in zip(query.parts, query.part_terms, strict=True):
        share, missing = coverage_of(terms, have)
        parts.append(
            {"text": p, "covered": share >= PART_COVERAGE, "coverage": round(share, 3), "missing": missing}
        )
    stated = states(text, asked.kind) if asked else True
    found = bool(answer.get("fact_found"))
    supported = bool(quotes) and found and stated
    covered = [p["text"] for p in parts if p["covered"]]
    uncovered = [p["text"] for p in parts if not p["covered"]]
    notes = []
    if not quotes:
        notes.append(f"no sentence was quoted (the question asks for {answer.get('asked') or 'a statement'})")
    elif not stated:
        notes.append(f"the question asks for {asked.describe()} and no quote states one")
    elif not found and answer.get("other_party"):
        party = answer["other_party"]
        notes.append(
            f"the quotes most likely to state it set out the duty of {_either(party['quoted'])}, "
            f"not of {_either(party['asked'])} as asked"
        )
    elif not found:
        what = answer.get("asked") or "a statement"
        risk = any(q.get("layout_risk") for q in answer.get("quotes", []))
        notes.append(
            f"no quoted sentence is likely enough to state what it asks for ({what})"
            + ("; the page's columns may run together in its text" if risk else "")
        )
    summary = []
    if covered:
        summary.append("The quotes cover: " + "; ".join(f"\u201c{c}\u201d" for c in covered) + ".")
    if uncovered:
        summary.append("They do not cover: " + "; ".join(f"\u201c{u}\u201d" for u in uncovered) + ".")
    if asked and stated:
        summary.append(f"A quote states {asked.describe()}.")
    elif asked and quotes:
        summary.append(
            f"The question asks for {asked.describe()} (\u201c{asked.phrase}\u201d); no quote states one "
            "in a form the pattern rules recognise: check the wording."
        )
    if notes:
        summary.append("Not supported: " + "; ".join(notes) + ".")
    return {
        "supported": supported,
        "complete": supported and not uncovered,
        "asked": {"kind": asked.kind, "phrase": asked.phrase, "stated": stated} if asked else None,
        "parts": parts,
        "summary": " ".join(summary),
    }


def point_covered(point: str, quotes: str, weights: Mapping[str, float] | None = None) -> bool:
    """Whether ``quotes`` cover one answer point: most of its content words (idf-weighted,
    ``PART_COVERAGE``) and every number it states (written in digits)."""
    share, _ = coverage(point, quotes, weights)
    nums = {n for n in numbers(point) if n[0].isdigit()}
    return share >= PART_COVERAGE and nums <= set(numbers(quotes))


def _either(roles: list[str]) -> str:
    """Roles as a person reads them: "importers or distributors"."""
    return " or ".join(plural(r) for r in roles) if roles else "another party"
