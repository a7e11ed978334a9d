"""Answer checking: which parts of a question the quoted sentences cover, and which not.

An extractive answer quotes sentences; this module says, for a reviewer and for the
decision, whether those sentences actually answer the question:

- **asked value**: a question that asks for a value — a duration ("how long", "within how
  many minutes"), a frequency ("how often"), a length, a money amount, a percentage, a
  concentration, a colour, or any number ("how many", "what is the maximum …") — is only
  answered when a quoted sentence states a value of that kind (a number with a matching
  unit, a frequency word such as "annually", a colour word). A topical quote without
  the value does not support an answer, however close its wording.
- **question parts**: the question is cut into parts at commas, semicolons, colons and
  "and"/"or" between clauses; a part is covered when most of its content words
  (idf-weighted, stemmed) appear in the quotes.
- **answer points** (evaluation only): the same coverage test, per labelled answer point
  of a benchmark question, plus every number of the point appearing in the quotes.

Rules only, no model: a reviewer can verify every verdict by reading the quotes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sourcepage.records import Decision
from sourcepage.retrieval.tokenize import TokenizerConfig, tokenize

_WORDS = TokenizerConfig(stopwords=True)
_STEMMED = TokenizerConfig(stopwords=True, stem=True)
#: share of a part's idf-weighted content words the quotes must hold for it to count as covered
PART_COVERAGE = 0.5

_NUMBER_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|"
    "forty|fifty|sixty|hundred|thousand|half|once|twice"
)
_NUM = rf"(?:\d+(?:[.,/]\d+)*|\b(?:{_NUMBER_WORDS})\b)"
_UNITS: dict[str, str] = {
    "duration": r"(?:seconds?|secs?|minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?|shifts?)\b",
    "length": r"(?:mm|cm|m|km|millimet(?:er|re)s?|centimet(?:er|re)s?|met(?:er|re)s?|inch(?:es)?|in\.|"
    r"feet|foot|ft|\"|'|yards?)(?![a-z])",
    "money": r"(?:dollars?|pounds?|euros?|penalty units)\b",
    "percentage": r"(?:%|per ?cent\b)",
    "concentration": r"(?:ppm|ppb|mg/m3|mg/m³|%|per ?cent\b|parts per million)",
    "speed": r"(?:km/h|kph|mph|m/s|metres per second|miles per hour)",
    "force": r"(?:n|kn|newtons?|kg|kilograms?|lbs?|pounds?)\b",
    "temperature": r"(?:°\s?[cf]|degrees?)\b",
    "resistance": r"(?:m?Ω|ohms?|megohms?|mΩ)",
    "mass": r"(?:kg|kilograms?|lbs?|pounds?|tonnes?|tons?)\b",
}
_FREQUENCY = re.compile(
    r"\b(?:daily|weekly|fortnightly|monthly|quarterly|annual(?:ly)?|yearly|hourly|every\b|each (?:shift|day|"
    r"week|month|year|use|time|working day)|before (?:each|every) (?:use|shift)|once|twice|"
    r"times (?:a|per|each)|per (?:day|week|month|year|shift)|at least (?:once|annually|yearly))",
    re.IGNORECASE,
)
_COLOURS = re.compile(
    r"\b(?:red|yellow|blue|green|orange|white|black|grey|gray|purple|brown|pink|amber|colou?r-coded)\b",
    re.IGNORECASE,
)
#: numbers that name a document, a section or a year rather than state a value
_REFERENCE = re.compile(
    r"\b\d+\.\d{2,}(?:\([0-9a-z]+\))*|\b\d+\s+CFR\b|\b(?:part|subpart|section|clause|regulation|"
    r"schedule|appendix|s\.|§)\s*\d+[\w.()/-]*|\b(?:OSHA|ISO|IEC|EN|AS/NZS|AS|BS|ANSI|NFPA|NIOSH)\s*\d+[\w.-]*|"
    r"\b(?:19|20)\d\d\b",
    re.IGNORECASE,
)

#: (pattern on the question, kind of value asked); the first match decides
_ASKS: tuple[tuple[str, str], ...] = (
    (r"\bwhat colou?rs?\b|\bwhich colou?rs?\b", "colour"),
    (r"\bhow (?:often|frequently)\b|\bat what intervals?\b|\bhow many times\b", "frequency"),
    (r"\b(?:in|of) (?:ppm|parts per million)\b|\bppm\b|\bconcentration\b", "concentration"),
    (r"\bin (?:km/h|kph|mph)\b|\bwind speed\b|\bwhat speed\b", "speed"),
    (r"\bnewtons?\b|\bwhat (?:push|pull) force\b", "force"),
    (r"\bmegohms?\b|\bohms?\b|\binsulation resistance\b", "resistance"),
    (r"\bwhat (?:air )?temperature\b|\bdegrees\b", "temperature"),
    (r"\b(?:in|what) per ?cent\b|\bwhat percentage\b|\bhow many per ?cent\b", "percentage"),
    (r"\b(?:penalty|fine|dollars?|how much money)\b", "money"),
    (r"\bratio\b", "number"),
    (
        r"\bhow long\b|\bhow (?:soon|quickly)\b|\b(?:within|after|for) how many "
        r"(?:seconds|minutes|hours|days|weeks|months|years)\b|\bhow many (?:seconds|minutes|hours|days|"
        r"weeks|months|years)\b",
        "duration",
    ),
    (
        r"\bhow (?:high|far|close|thick|wide|deep|tall|low)\b|\b(?:minimum|maximum)(?: allowed| permitted)? "
        r"(?:\w+ )?(?:height|width|distance|gap|clearance|depth|thickness|length)\b|"
        r"\bhow much (?:thicker|higher|wider)\b",
        "length",
    ),
    (
        r"\bhow (?:many|much|heavy)\b|\bwhat (?:is the )?(?:(?:minimum|maximum|recommended) )?(?:\w+ )?"
        r"(?:ratio|score|number|weight|age|level|limit|load|headcount|rating|value)\b|"
        r"\b(?:above|below|at) what\b",
        "number",
    ),
)


@dataclass(frozen=True)
class AskedValue:
    """The kind of value a question asks for and the words that ask it."""

    kind: str
    phrase: str

    def describe(self) -> str:
        return {
            "number": "a number",
            "duration": "a duration (a number of minutes, hours, days, months or years)",
            "frequency": "a frequency (how often)",
            "length": "a distance or size (a number with a length unit)",
            "money": "an amount of money",
            "percentage": "a percentage",
            "concentration": "a concentration (ppm, %, mg/m³)",
            "speed": "a speed",
            "force": "a force or weight",
            "temperature": "a temperature",
            "resistance": "a resistance value",
            "colour": "a colour",
        }[self.kind]


def asked_value(question: str) -> AskedValue | None:
    """The value the question asks for, or None when it asks for none (see the module
    docstring). "what is the maximum penalty" asks for money, "how often" a frequency."""
    for pattern, kind in _ASKS:
        m = re.search(pattern, question, re.IGNORECASE)
        if m:
            return AskedValue(kind, m.group(0).strip())
    return None


def _numbers(text: str) -> list[re.Match[str]]:
    masked = _REFERENCE.sub(lambda m: " " * len(m.group(0)), text)  # "29 CFR 1910.147" is no value
    return list(re.finditer(_NUM, masked, re.IGNORECASE))


def states_value(kind: str, text: str) -> bool:
    """Whether ``text`` states a value of ``kind``: a number followed (within a few
    characters) by a unit of that kind, a frequency word, a colour word, or any number."""
    if kind == "colour":
        return bool(_COLOURS.search(text))
    if kind == "frequency":
        return bool(_FREQUENCY.search(text))
    nums = _numbers(text)
    if kind == "number":
        return bool(nums)
    if kind == "money" and re.search(r"[$£€]\s?\d", text):
        return True
    unit = re.compile(r"\s?(?:-\s?)?" + _UNITS[kind], re.IGNORECASE)
    return any(unit.match(text, m.end()) for m in nums)


def weighted_terms(text: str, weights: Mapping[str, float] | None) -> dict[str, float]:
    """Stemmed content words of ``text`` → weight (the largest idf of a word with that stem)."""
    out: dict[str, float] = {}
    # stemming maps token to token, so the two lists align
    for w, s in zip(tokenize(text, _WORDS), tokenize(text, _STEMMED), strict=True):
        if w not in ("a", "i"):
            out[s] = max(out.get(s, 0.0), (weights or {}).get(w, 1.0))
    return out


def coverage(text: str, quotes: str, weights: Mapping[str, float] | None = None) -> tuple[float, list[str]]:
    """(idf-weighted share of ``text``'s content words found in ``quotes``, the missing
    stems), matching on Snowball stems so "slicing" meets "slice"."""
    terms = weighted_terms(text, weights)
    have = set(tokenize(quotes, _STEMMED))
    total = sum(terms.values())
    if not total:
        return 1.0, []
    missing = [t for t in terms if t not in have]
    return 1.0 - sum(terms[t] for t in missing) / total, missing


_SPLIT = re.compile(r"\s*(?:[,;:?]|\s—\s|\s-\s|\band\b|\bor\b)\s*", re.IGNORECASE)


def question_parts(question: str) -> list[str]:
    """The parts of a question: pieces between commas, semicolons, colons, dashes and
    "and"/"or", each with at least two content words (shorter pieces join the previous one)."""
    parts: list[str] = []
    for piece in _SPLIT.split(question):
        piece = piece.strip()
        if not piece:
            continue
        if parts and len(weighted_terms(piece, None)) < 2:
            parts[-1] = f"{parts[-1]} {piece}"
        else:
            parts.append(piece)
    return [p for p in parts if weighted_terms(p, None)] or [question.strip()]


def check_answer(
    question: str, quotes: Sequence[str], weights: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """What the quoted sentences cover of the question.

    Returns ``{"supported", "complete", "asked": {"kind", "phrase", "stated"} | None,
    "parts": [{"text", "covered", "coverage", "missing"}], "summary"}``. ``supported``:
    there are quotes, at least one part is covered and, when the question asks for a
    value, a quote states one of that kind — the condition for an automatic answer.
    ``complete``: supported and every part covered (parts are cut by rule, so an
    uncovered part is a pointer for the reviewer, not a verdict)."""
    text = " ".join(quotes)
    parts = []
    for p in question_parts(question):
        share, missing = coverage(p, text, weights)
        parts.append(
            {"text": p, "covered": share >= PART_COVERAGE, "coverage": round(share, 3), "missing": missing}
        )
    asked = asked_value(question)
    stated = states_value(asked.kind, text) if asked else True
    supported = bool(quotes) and stated
    covered = [p["text"] for p in parts if p["covered"]]
    uncovered = [p["text"] for p in parts if not p["covered"]]
    notes = []
    if not quotes:
        notes.append("no sentence was quoted")
    if asked and not stated:
        notes.append(
            f"the question asks for {asked.describe()} (\u201c{asked.phrase}\u201d) and no quoted sentence "
            "states one"
        )
    summary = []
    if covered:
        summary.append("The quotes cover: " + "; ".join(f"\u201c{c}\u201d" for c in covered) + ".")
    if uncovered:
        summary.append("They do not cover: " + "; ".join(f"\u201c{u}\u201d" for u in uncovered) + ".")
    if asked and stated:
        summary.append(f"A quote states {asked.describe()}.")
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
    ``PART_COVERAGE``) and every number it states."""
    share, _ = coverage(point, quotes, weights)
    nums = {m.group(0).lower() for m in _numbers(point) if m.group(0)[0].isdigit()}
    have = {m.group(0).lower() for m in _numbers(quotes)}
    return share >= PART_COVERAGE and nums <= have


def gate(
    question: str,
    answer: dict[str, Any],
    decision: Decision,
    weights: Mapping[str, float] | None = None,
) -> tuple[dict[str, Any], Decision]:
    """Check an extractive answer (``answer.extract_answer``'s dict; its ``check`` is set)
    and keep an ``answer`` decision only when the quotes support it: when they do not —
    above all when the question asks for a value no quote states — the decision becomes
    ``review`` with the reason, and the quotes a draft for the reviewer."""
    quotes = [q["text"] for q in answer.get("quotes", [])]
    if decision.decision == "refuse":
        return answer, decision
    verdict = check_answer(question, quotes, weights)
    answer = {**answer, "check": verdict}
    if decision.decision != "answer" or verdict["supported"]:
        return answer, decision
    answer["status"] = "draft for review" if quotes else "none"
    reason = f"The quoted sentences do not answer the question. {verdict['summary']}"
    return answer, Decision("review", (reason, *decision.reasons))
