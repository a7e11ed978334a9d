"""Jurisdiction routing (study §5.5): a question that names a jurisdiction, an authority or
a document is answered from that jurisdiction's pages only.

The names come from the corpus, not from a hand-written list of jurisdictions:

* every manifest jurisdiction code (``US``, ``AU-NSW``) and its parts (``NSW``), matched
  case-sensitively as whole words;
* the ISO 3166 names of the code's country and subdivision (``pycountry``: "United States",
  "Australia", "New South Wales"; ``UK`` is ISO's reserved code for GB), matched as words
  with an optional suffix ("Australian", "Zealand's");
* each document's authority (its first run of capitalised words, parenthetical remarks
  dropped: "SafeWork NSW", "Safe Work Australia") and the acronyms of the authority
  ("OSHA", "HSE");
* each document's publication code, in its title or its id ("HSG150", "L153", "OSHA 3120",
  "cdm2015"), matched with or without the space ("According to HSG150, …" names the UK).

A country-level name (a country name or a bare country code) also admits the country's
sub-jurisdictions present in the corpus ("in Australia" → AU and AU-NSW); an authority or a
sub-jurisdiction name admits only its own ("under the NSW code" → AU-NSW). A country named
in the question that no document covers ("in Canada") is reported as ``uncovered``.

The route's ``query`` is the question with the matched names removed, so that a name that
appears on every cover page of a jurisdiction's documents ("NSW", "OSHA") no longer pulls
those pages up. ``route:<base>`` is the registered stage that applies it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from sourcepage.records import Document, Hit, renumber
from sourcepage.retrieval.parsed import Parsed, Route

if TYPE_CHECKING:
    from sourcepage.retrieval.methods import Method
    from sourcepage.retrieval.search import Searcher

# ISO 3166-1 reserves "UK" for the United Kingdom (alpha-2 "GB"); "EU" is reserved for the
# European Union, which has no ISO country entry
_ISO_EXCEPTIONS = {"UK": "GB"}
_ACRONYM = re.compile(r"\b[A-Z]{2,6}\b")
#: a publication code in a title: capitals then digits ("HSG150", "L74", "OSHA 3120"); a
#: space only after two capitals or more ("OJ L 165" is a journal page), and never part of
#: a citation, a date or a number ("29 CFR 1910.147", "HSE 08/11", "DOC19/1307289", "ISBN
#: 978-0-…"; the id gives "OSHA 3146-05R" its code)
_TITLE_CODE = re.compile(r"(?<![\w/.-])(?:([A-Z]{2,5}) ?|([A-Z]))(\d{2,4})(?![\w/.]|-\d)")
#: a publication code as a word of a document id ("uk-hse-hsg150-construction", "cdm2015")
_ID_CODE = re.compile(r"(?<![a-z0-9])([a-z]{1,5})(\d{2,4})(?![a-z0-9])")
# words of an authority that name what it is, not where: not aliases on their own
_GENERIC = {
    # the field's own abbreviations, in authorities' remarks ("s274 WHS Act 2011") but
    # naming no jurisdiction: every Australian state has a WHS Act, so "WHS" routed a
    # construction question to the national documents only
    "whs",
    "ohs",
    "osh",
    "and",
    "of",
    "the",
    "for",
    "on",
    "at",
    "department",
    "office",
    "council",
    "executive",
    "parliament",
    "parliamentary",
    "counsel",
    "publications",
    "safety",
    "health",
    "work",
    "labor",
    "labour",
    "administration",
    "occupational",
    "government",
    "based",
    "model",
    "code",
    "european",
}


def country(code: str) -> str:
    """The country of a jurisdiction code in ISO 3166-2 form ("AU-NSW" → "AU", "US" → "US"):
    the level at which a country name admits the sub-jurisdictions (see the module doc)."""
    return code.partition("-")[0]


#: a manifest authority that says the document adopts its country's model code
_ADOPTS_MODEL = re.compile(r"\bbased on\b[^)]*\bmodel\b", re.IGNORECASE)


def legal_jurisdiction(code: str, authority: str) -> str:
    """The jurisdiction whose text a document states: its own code, or its country's when
    its manifest authority says it is based on the model code ("SafeWork NSW (based on Safe
    Work Australia model code)": the national code, adopted in NSW). A state's own
    documents keep the state (WorkSafe WA defines a 'construction project' by five
    persons on site, the model regulations by $250 000)."""
    return country(code) if code and _ADOPTS_MODEL.search(authority or "") else code


@lru_cache(maxsize=4096)
def _word_pattern(name: str, case_sensitive: bool) -> re.Pattern[str]:
    body = r"\s+".join(re.escape(w) for w in name.split())
    if case_sensitive:
        return re.compile(rf"(?<![\w-]){body}(?:['’]s)?(?![\w-])")
    return re.compile(rf"(?<![\w-]){body}(?:n|ns|'s|’s|s)?(?![\w-])", re.IGNORECASE)


@lru_cache(maxsize=1)
def _countries() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(alpha-2, names) of every ISO 3166 country."""
    import pycountry

    out = []
    for c in pycountry.countries:
        names = {c.name, getattr(c, "common_name", c.name), getattr(c, "official_name", c.name)}
        out.append((c.alpha_2, tuple(sorted(n for n in names if n))))
    return tuple(out)


def _iso_names(code: str) -> tuple[list[str], bool]:
    """ISO names of a jurisdiction code and whether it is country-level."""
    import pycountry

    country, _, sub = code.partition("-")
    country = _ISO_EXCEPTIONS.get(country, country)
    if sub:
        s = pycountry.subdivisions.get(code=f"{country}-{sub}")
        return ([s.name] if s else []), False
    c = pycountry.countries.get(alpha_2=country)
    if c is None:
        return [], True
    return [n for n in {c.name, getattr(c, "common_name", "")} if n], True


def publication_codes(doc: Document) -> list[tuple[str, str]]:
    """(letters, digits) of the publication codes a document is known by: those in its
    title ("Health and safety in construction, HSG150 (3rd edition …)") and the words of
    its id of that shape ("uk-hse-l153-cdm2015"). A year alone ("Regulations 2015") is no
    code: the letters are capitals in a title, a word of their own in an id."""
    found = {(a or b, n) for a, b, n in _TITLE_CODE.findall(doc.title or "")}
    found |= {(a.upper(), n) for a, n in _ID_CODE.findall(doc.doc_id or "")}
    return sorted(found)


class Router:
    """Recognises the jurisdictions named in a question, from a corpus's documents."""

    def __init__(self, docs: Iterable[Document]):
        docs = list(docs)
        codes = sorted({d.jurisdiction for d in docs if d.jurisdiction})
        self.codes = tuple(codes)
        children = {c: [k for k in codes if k.startswith(c + "-")] for c in codes}
        names: dict[tuple[str, bool], set[str]] = {}  # (name, case-sensitive) → codes
        #: publication codes stay in the routed query: a code names its own document's
        #: topic ("CDM 2015" is what L153's pages are about), not only where it is from
        self.codes_kept: set[str] = set()

        def add(name: str, cs: bool, targets: Iterable[str]) -> None:
            name = name.strip()
            if len(name) >= 2 and name.lower() not in _GENERIC:
                names.setdefault((name, cs), set()).update(targets)

        for code in codes:
            own = [code, *children.get(code, [])]
            add(code, True, own)
            for part in code.split("-")[1:]:
                add(part, True, [code])
            iso, country_level = _iso_names(code)
            for n in iso:
                add(n, False, own if country_level else [code])
        for d in docs:
            if not d.jurisdiction:
                continue
            for acro in _ACRONYM.findall(d.authority or ""):  # "OSHA", "HSE"
                add(acro, True, [d.jurisdiction])
            authority = re.sub(r"\([^)]*\)", " ", d.authority or "")
            run = re.search(r"[A-Z][\w’'-]*(?:\s+[A-Z][\w’'-]*)+", authority)  # "Safe Work Australia"
            if run:
                add(" ".join(run.group(0).split()), False, [d.jurisdiction])
            for letters, digits in publication_codes(d):  # "HSG150" and "HSG 150"
                for code in (letters + digits, f"{letters} {digits}"):
                    add(code, False, [d.jurisdiction])
                    self.codes_kept.add(code)
        # a name claimed by several jurisdictions that are not one country and its parts
        # says nothing about where: dropped
        self.names = {k: tuple(sorted(v)) for k, v in names.items() if len({country(c) for c in v}) == 1}
        self._patterns = sorted(
            ((_word_pattern(n, cs), n, v) for (n, cs), v in self.names.items()),
            key=lambda t: -len(t[1]),  # longest names first: "Safe Work Australia" before "Australia"
        )
        covered = {_ISO_EXCEPTIONS.get(country(c), country(c)) for c in codes}
        # the names of the countries no document is from (about 400): each pattern is compiled
        # the first time a question holds all its words (compiling them all up front cost a
        # one-shot search 0.9 s)
        self._foreign = [
            (n, tuple(w.lower() for w in n.split()))
            for a2, ns in _countries()
            if a2 not in covered
            for n in ns
            if " " in n or len(n) > 4  # short names ("Chad", "Peru") are too often other words
        ]

    def route(self, question: str) -> Route:
        text = question
        matched: list[str] = []
        found: set[str] = set()
        named: list[tuple[int, tuple[str, ...]]] = []  # (place in the question, jurisdictions)
        for pat, name, targets in self._patterns:
            if m := pat.search(text):
                matched.append(name)
                found.update(targets)
                named.append(((pat.search(question) or m).start(), tuple(targets)))
                if name not in self.codes_kept:
                    text = pat.sub(" ", text)
        low = text.lower()
        uncovered = sorted(
            {
                n
                for n, words in self._foreign
                if all(w in low for w in words) and _word_pattern(n, False).search(text)
            }
        )
        query = re.sub(r"\s+", " ", text).strip()
        groups = tuple(dict.fromkeys(t for _, t in sorted(named)))
        return Route(tuple(sorted(found)), tuple(matched), tuple(uncovered), query or question, groups)


def router(searcher: Searcher) -> Router:
    """The searcher's router (built once from its documents)."""
    return searcher.memo("router", lambda: Router(searcher.documents.values()))


@dataclass(frozen=True)
class RouteSettings:
    """Routing's settings (its ``settings_type``, experiment.yaml section ``route``): none
    yet; the names it routes on come from the store's documents."""


class RouteMethod:
    """The registered stage ``route:<base>``: when the question names covered
    jurisdictions (and the caller set no jurisdiction filter), rank ``base`` on those
    jurisdictions' pages with the names removed from the query; else rank ``base`` as is."""

    kind = "route"
    grammar = "route:<base>"
    summary = "jurisdiction routing: filter to the named jurisdiction, names removed from the query"
    arity = "one"
    settings_type = RouteSettings

    def examples(self, bases: Sequence[str]) -> list[str]:
        return ["route:bm25"] + (["route:rrf:bm25+dense"] if "dense" in bases else [])

    def rank(
        self,
        searcher: Searcher,
        method: Method,
        query: str,
        k: int | None,
        filters: dict[str, list[str]],
        parsed: Parsed | None = None,
    ) -> list[Hit]:
        """``parsed.route`` when the search routed the question already (``Query``), else
        the route of ``query``; ``parsed`` goes on to the base."""
        r = parsed.route if parsed is not None and parsed.route is not None else router(searcher).route(query)
        base = method.parts[0]
        if not r.jurisdictions or "jurisdiction" in filters:
            return searcher.ranked(base, query, k, filters, parsed)
        if r.compares:  # each side ranked on its own pages, the rankings merged by score
            return merge_sides(
                [
                    searcher.ranked(base, r.query, k, {**filters, "jurisdiction": list(g)}, parsed)
                    for g in r.groups
                ],
                k,
            )
        return searcher.ranked(base, r.query, k, {**filters, "jurisdiction": list(r.jurisdictions)}, parsed)


def merge_sides(rankings: Sequence[Sequence[Hit]], k: int | None) -> list[Hit]:
    """One ranking of a comparison's sides, each ranked within its own jurisdictions: by
    score (a side's first page scores as a first page), ties by side and rank, a page of
    two sides once. Ranked together, the side with more matching words filled the first
    ten ("compare OSHA's position with the NSW code": nine NSW pages and one OSHA page)."""
    best: dict[str, tuple[tuple[float, int, int, str], Hit]] = {}
    for side, ranking in enumerate(rankings):
        for h in ranking:
            key = (-round(h.score, 12), side, h.rank, h.page_id)
            if h.page_id not in best or key < best[h.page_id][0]:
                best[h.page_id] = (key, h)
    order = [h for _, h in sorted(best.values(), key=lambda kh: kh[0])]
    return renumber(order[:k] if k else order)


METHOD = RouteMethod()
