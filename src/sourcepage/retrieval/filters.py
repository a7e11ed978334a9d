"""Metadata filters applied before ranking (study §3.1: jurisdiction is a filter or a
routing constraint, not something to mix after the fact).

A filter maps a manifest column (standard or extra, e.g. ``project_type``) to one
value or a list of accepted values, compared case-insensitively; ``year_from`` and
``year_to`` bound the year (documents without a year are excluded by a bound). An extra
column is a ``;``-list, matched by any of its values (``corpus.fields``).

``section`` is the one filter of pages rather than documents: a page passes when one of the
heading paths that cover it (``corpus.structure``, stored at ingest) holds a value. A value
that is a citation ("Article 10", "s 44", "section 44", "clause 4.3", "Schedule 1") is matched
as one (``corpus.structure.cites``: "44 Duty of officers" is section 44, "4.3. Entry
permits" clause 4.3); any other value as whole words, case and spacing ignored ("Duty of
officers", "Entry permits").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from sourcepage.corpus.fields import field_matches
from sourcepage.corpus.structure import cited_sections, path_cites
from sourcepage.records import MANIFEST_COLUMNS, Document

RANGE_KEYS = ("year_from", "year_to")
#: filters of a page's own fields, not of its document's
PAGE_KEYS = ("section",)
Filters = Mapping[str, str | int | Sequence[str]]


def known_filter_keys(docs: Iterable[Document]) -> list[str]:
    extra = sorted({k for d in docs for k in d.extra})
    own = [c for c in MANIFEST_COLUMNS if c not in ("sha256", "pages", "file")]
    return own + extra + [*RANGE_KEYS, *PAGE_KEYS]


def check_filters(filters: Filters | None, docs: Iterable[Document]) -> dict[str, list[str]]:
    """Normalise filters to {key: [values]}; ValueError names an unknown key or bad year
    (``docs``, for the extra columns, is read only when there are filters)."""
    out: dict[str, list[str]] = {}
    if not filters:
        return out
    known = known_filter_keys(docs)
    for key, value in filters.items():
        if key not in known:
            raise ValueError(f"unknown filter {key!r}; known filters: {', '.join(known)}")
        values = [value] if isinstance(value, str | int) else list(value)
        values = [str(v).strip() for v in values if str(v).strip()]
        if key in RANGE_KEYS and (len(values) != 1 or not values[0].isdigit()):
            raise ValueError(f"filter {key} needs one year, got {value!r}")
        if values:
            out[key] = values
    return out


def matches(doc: Document, filters: Mapping[str, list[str]]) -> bool:
    """True when ``doc`` passes every document filter (page filters, ``PAGE_KEYS``, are
    ``section_matches``')."""
    for key, values in filters.items():
        if key in PAGE_KEYS:
            continue
        if key == "year_from":
            if not doc.year.isdigit() or int(doc.year) < int(values[0]):
                return False
        elif key == "year_to":
            if not doc.year.isdigit() or int(doc.year) > int(values[0]):
                return False
        elif not field_matches(doc, key, values):
            return False
    return True


def page_filters(filters: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """The filters of pages among ``filters`` (``PAGE_KEYS``)."""
    return {k: v for k, v in filters.items() if k in PAGE_KEYS}


def section_test(values: Sequence[str]) -> Callable[[Sequence[str]], bool]:
    """The ``section`` filter's test of a page's heading paths: true when a path holds one of
    ``values`` — a citation as the provision it cites, other words as whole words, any white
    space between them, case ignored."""
    cited: list[tuple[str, str]] = []
    words: list[str] = []
    for v in values:
        c = cited_sections(v)
        if len(c) == 1 and re.fullmatch(r"[\s\w.]+", v) and v.split()[-1].strip(".") == c[0][1]:
            cited += c
        elif v.split():
            words.append(r"\s+".join(re.escape(w) for w in v.split()))
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(words) + r")(?!\w)", re.IGNORECASE) if words else None
    return heading_test(cited, pattern)


def heading_test(
    cited: Sequence[tuple[str, str]], pattern: re.Pattern[str] | None = None
) -> Callable[[Sequence[str]], bool]:
    """The test of a page's heading paths: true when a path cites one of the provisions
    ``cited`` ((kind, number), as ``corpus.structure.cited_sections`` parses them) or holds
    ``pattern``. A question's cited provisions (``Query.cited``) are tested as they were
    parsed, not written out and parsed again."""

    def holds(path: str) -> bool:
        return bool(pattern and pattern.search(path)) or any(path_cites(path, k, n) for k, n in cited)

    def test(paths: Sequence[str]) -> bool:
        return any(holds(p) for p in paths)

    return test
