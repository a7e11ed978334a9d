"""The kind of fact a question asks for, and whether a sentence states a fact of that kind.

One module for both sides, read by the quote choice (``support.answer``), the answer check
(``support.check``), the feature ``value_missing`` (``support.features``) and, through the
check, the decision gate (``support.decide.gate``: an answer to a value question needs a
quote stating a value of its kind).

- **values**: a duration ("how long", "within how many minutes", "the maximum number of
  years"), a frequency ("how often"), a distance or size ("how many inches"), an amount of
  money ("what fee", "how much does it cost"), a percentage ("as a share of the work
  group"), a concentration, a speed, a force, a temperature, a resistance, a colour, or any
  number ("how many", "what is the maximum …"). A question asks for at most one value:
  the first kind of ``VALUE_ASKS`` whose pattern matches ("how many minutes" is a
  duration, not a number). A sentence states it with a number followed by a unit of that
  kind (a number that names a section, a standard or a year — "29 CFR 1910.147", "ISO
  45001", "2019" — is no value), a frequency expression ("annually", "at least once a
  year"), a colour word or, for a number, any number.
- **other facts**: a person ("who may"), a list ("what are the steps") and a condition
  ("when must"); a sentence states them by naming a role, by enumerating (or being a
  quoted list or list item), or by a conditional word.

Rules only, no model: a reviewer can see why a sentence states (or not) what was asked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["Asked", "VALUE_ASKS", "WORDS", "asked_facts", "asked_value", "numbers", "states"]

_NUMBER_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|"
    "forty|fifty|sixty|hundred|thousand|half|once|twice"
)
_NUM = re.compile(rf"(?:\d+(?:[.,/]\d+)*|\b(?:{_NUMBER_WORDS})\b)", re.IGNORECASE)
#: value kind → the units that follow its number
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
}
_UNIT_AFTER = {k: re.compile(r"\s?(?:-\s?)?" + u, re.IGNORECASE) for k, u in _UNITS.items()}
_PERIOD = r"(?:year|month|week|day|shift|hour|minute|time|use|entry|job|task)s?"
_FREQUENCY = re.compile(
    r"\b(?:daily|weekly|fortnightly|monthly|quarterly|annual(?:ly)?|yearly|hourly|every\b|each (?:shift|day|"
    r"week|month|year|use|time|working day)|before (?:each|every) (?:use|shift)|once|twice|"
    r"times (?:a|per|each)|per (?:day|week|month|year|shift)|at least (?:once|annually|yearly))|"
    rf"\b(?:each {_PERIOD}|per {_PERIOD}|"
    r"(?:before|after|at the (?:start|beginning|end) of) (?:each|every) \w+)\b",
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

#: (pattern on the question, kind of value asked), in priority order: the first match decides
VALUE_ASKS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.IGNORECASE), kind)
    for p, kind in (
        (r"\bwhat colou?rs?\b|\bwhich colou?rs?\b", "colour"),
        (
            r"\bhow (?:often|frequently|regularly)\b|\bat what (?:intervals?|frequency)\b|\bhow many times\b",
            "frequency",
        ),
        (r"\b(?:in|of) (?:ppm|parts per million)\b|\bppm\b|\bconcentration\b", "concentration"),
        (r"\bin (?:km/h|kph|mph)\b|\bwind speed\b|\bwhat speed\b", "speed"),
        (r"\bnewtons?\b|\bwhat (?:push|pull) force\b", "force"),
        (r"\bmegohms?\b|\bohms?\b|\binsulation resistance\b", "resistance"),
        (r"\bwhat (?:air )?temperature\b|\bdegrees\b", "temperature"),
        (
            r"\b(?:in|what) per ?cent\b|\bwhat percentage\b|\bhow many per ?cent\b|"
            r"\bas a (?:share|proportion|percentage|fraction) of\b|\bwhat (?:share|proportion|fraction)\b",
            "percentage",
        ),
        (
            r"\b(?:penalty|fine|dollars?|how much money)\b|\bwhat (?:\w+ )?fees?\b|"
            r"\bhow much (?:does|do|will|would|is|are) (?:\w+ ){0,5}(?:pay|cost|charge)s?\b",
            "money",
        ),
        (r"\bratio\b", "number"),
        (
            r"\bhow long\b|\bhow much time\b|\bhow (?:soon|quickly)\b|\b(?:within|after|for) how many "
            r"(?:seconds|minutes|hours|days|weeks|months|years)\b|\bhow many (?:seconds|minutes|hours|days|"
            r"weeks|months|years)\b|\bnumber of (?:seconds|minutes|hours|days|weeks|months|years)\b|"
            r"\b(?:longest|shortest|maximum|minimum) (?:time|period)\b",
            "duration",
        ),
        (
            r"\bhow (?:high|far|close|thick|wide|deep|tall|low)\b|"
            r"\b(?:minimum|maximum)(?: allowed| permitted)? "
            r"(?:\w+ )?(?:height|width|distance|gap|clearance|depth|thickness|length)\b|"
            r"\bhow much (?:thicker|higher|wider)\b|\bwhat (?:distance|height|depth)\b|"
            r"\bhow many (?:mm|cm|millimet(?:er|re)s|centimet(?:er|re)s|met(?:er|re)s|inches|feet|yards)\b",
            "length",
        ),
        (
            r"\bhow (?:many|much|heavy|large|big|loud)\b|"
            r"\bwhat (?:is the )?(?:(?:minimum|maximum|recommended) )?"
            r"(?:\w+ )?(?:ratio|score|number|weight|age|level|limit|load|headcount|rating|value)\b|"
            r"\b(?:above|below|at) what\b",
            "number",
        ),
    )
)
#: the other kinds of fact: (how the question asks for it, how a sentence states it)
_OTHER: dict[str, tuple[re.Pattern[str], re.Pattern[str]]] = {
    "actor": (
        re.compile(
            r"^\s*who\b|\bwho (?:may|must|can|should|is|are|has|will|does)\b|\bwhich (?:person|employee)"
        ),
        re.compile(
            r"\b(?:employers?|employees?|workers?|persons?|supervisors?|attendants?|entrants?|inspectors?|"
            r"authorized|qualified|competent|managers?|operators?|contractors?|team|individuals?|"
            r"rescuers?|he or she|only the)\b",
            re.IGNORECASE,
        ),
    ),
    "list": (
        re.compile(
            r"\bwhat (?:are|were) the (?:steps|elements|parts|types|kinds|components|requirements|duties|"
            r"responsibilities|hazards|causes|signs|methods|controls|criteria)\b|\b(?:which|what) "
            r"(?:kinds|types|sorts|parts|steps|items|information|properties|elements|components|jobs|"
            r"hazards|methods|measures|duties|controls)\b|\bsteps\b|\blist\b|\binclude\b"
        ),
        # a sentence that enumerates: three separators, or "including A, B" / "the following …"
        re.compile(
            r"(?:[^,;]+[,;]){3,}|:\s*[•■▪●]|\b(?:includes?|including|such as)\b[^.]*,|\bthe following\b",
            re.IGNORECASE,
        ),
    ),
    "condition": (
        re.compile(
            r"\bwhen (?:must|do|does|is|are|should|can|may|am|will|would)\b|\bunder what (?:conditions|"
            r"circumstances)\b|\bin what (?:cases|situations)\b|\b(?:is|are) (?:it|they|we|a|an|the)\b.*"
            r"\b(?:required|necessary|acceptable|allowed|permitted|enough|exempt)\b|"
            r"\bdo (?:i|we|they|you) (?:have|need) to\b|\b(?:count|qualify) as\b|\bobliged\b"
        ),
        re.compile(
            r"\b(?:if|when|whenever|unless|only|where|provided|except|before|after|until|in lieu)\b",
            re.IGNORECASE,
        ),
    ),
}
#: each kind of fact in words (answers' ``asked``, the check's summary, decision reasons)
WORDS: dict[str, str] = {
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
    "actor": "who (a person or role)",
    "list": "a list",
    "condition": "a condition (when or if)",
}


@dataclass(frozen=True)
class Asked:
    """A kind of fact a question asks for, the words that ask it and where they start."""

    kind: str
    phrase: str
    start: int = 0

    @property
    def value(self) -> bool:
        """Whether the kind is a value (a number with a unit, a frequency, a colour)."""
        return self.kind not in _OTHER

    def describe(self) -> str:
        """The kind in words (``WORDS``), as answers, checks and reasons name it."""
        return WORDS[self.kind]


def asked_value(question: str) -> Asked | None:
    """The value the question asks for (see the module docstring), or None when it asks
    for none: "what is the maximum penalty" asks for money, "how often" a frequency."""
    for pattern, kind in VALUE_ASKS:
        if m := pattern.search(question):
            return Asked(kind, m.group(0).strip(), m.start())
    return None


def asked_facts(question: str) -> list[Asked]:
    """Every kind of fact ``question`` asks for, in the order the question asks them (at
    most one value, ``asked_value``); empty when it asks for none that is recognised."""
    found = [a] if (a := asked_value(question)) else []
    q = question.lower()
    for kind, (ask, _) in _OTHER.items():
        if m := ask.search(q):
            found.append(Asked(kind, question[m.start() : m.end()].strip(), m.start()))
    return sorted(found, key=lambda a: (a.start, a.kind))


def _numbers(text: str) -> list[re.Match[str]]:
    masked = _REFERENCE.sub(lambda m: " " * len(m.group(0)), text)  # "29 CFR 1910.147" is no value
    return list(_NUM.finditer(masked))


def numbers(text: str) -> list[str]:
    """The numbers ``text`` states (lower-cased), leaving out those that name a section,
    a standard or a year."""
    return [m.group(0).lower() for m in _numbers(text)]


#: a negated "include" and the rest of its sentence: a disclaimer, not an enumeration
_NOT_A_LIST = re.compile(r"\b(?:not|never|n't)\s+(?:\w+\s+)?(?:includes?|including)\b[^.]*", re.IGNORECASE)


@lru_cache(maxsize=16384)  # the units of the pages a search quotes are read again by the next
def states(text: str, kind: str, unit: str = "sentence") -> bool:
    """Whether ``text`` states a fact of ``kind`` (see the module docstring); a list is
    stated by a quoted list or list item (``unit``, see ``text.sentences.Quotable.kind``) too."""
    if kind in _OTHER:
        if kind == "list":
            if unit in ("list", "item"):
                return True
            # "do not necessarily include all the steps, hazards, and …" disclaims a list
            text = _NOT_A_LIST.sub(" ", text)
        return _OTHER[kind][1].search(text) is not None
    if kind == "colour":
        return bool(_COLOURS.search(text))
    if kind == "frequency":
        return bool(_FREQUENCY.search(text))
    nums = _numbers(text)
    if kind == "number":
        return bool(nums)
    if kind == "money" and re.search(r"[$£€]\s?\d", text):
        return True
    return any(_UNIT_AFTER[kind].match(text, m.end()) for m in nums)
