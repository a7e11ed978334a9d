"""What the ranking stages read of a question, parsed once: the jurisdictions it names
(``Route``, read by ``route:``) and the provisions it cites (read by ``sect:``).

A search parses the question once, in ``query.Query``, and hands these facts down every
stage as a ``Parsed`` (``Searcher.ranked``'s ``parsed``): retrieval stands below
``query.py``, so the record it reads is declared here. A stage given none (``Searcher.rank``,
``sourcepage rank``, a benchmark script) parses the text it ranks, as before.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Route:
    """What a question names: covered jurisdictions (manifest codes), the names matched,
    countries named that the corpus does not cover, and the question without the names."""

    jurisdictions: tuple[str, ...]
    matched: tuple[str, ...]
    uncovered: tuple[str, ...]
    query: str
    #: the distinct sets of jurisdictions the matched names admit, in question order
    #: ("OSHA" → US, "the NSW code" → AU-NSW, "in Australia" → AU and AU-NSW)
    groups: tuple[tuple[str, ...], ...] = ()

    @property
    def compares(self) -> bool:
        """The question names jurisdictions to compare: two of its groups share none
        ("OSHA" and "HSE"; "WorkSafe WA" and "Safe Work Australia"). "Safe Work Australia"
        beside "Australia" is one place named twice, not a comparison."""
        return any(not set(a) & set(b) for i, a in enumerate(self.groups) for b in self.groups[i + 1 :])

    def as_dict(self) -> dict[str, object]:
        return {
            "jurisdictions": list(self.jurisdictions),
            "matched": list(self.matched),
            "uncovered": list(self.uncovered),
            "compares": self.compares,
            "groups": [list(g) for g in self.groups],
        }


@dataclass(frozen=True)
class Parsed:
    """A question's facts as the stages read them. ``route``: the jurisdictions it names
    (None: not routed, ``route:`` routes the text); ``cited``: the provisions it cites, as
    (kind, number) (``corpus.structure.cited_sections``); ``under_cited``: rank only the
    pages under ``cited`` (``sect:``'s ranking of the cited provisions' pages, tested as
    parsed, not written out as a ``section`` filter and parsed again).

    They are the question's facts, not those of the text a stage ranks: ``route:`` ranks its
    base on the question without the names, and the question still cites what it cites."""

    route: Route | None
    cited: tuple[tuple[str, str], ...]
    under_cited: bool = False
