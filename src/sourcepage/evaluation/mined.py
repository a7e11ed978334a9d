"""Training pairs mined from a store's own page structure, without outside labels.

A section heading is a short question its pages answer: "44 Duty of officers" → the pages
under s 44. For every heading path of a document (``corpus.structure``, kept per page by the
store: ``Store.page_structure``), ``mine_pairs`` makes one pair

* query: the path's last title with its number or label stripped ("Duty of officers",
  "Obligations of manufacturers of machinery");
* positives: the pages the section covers (every page whose heading paths include the path
  or one below it), without listing pages (contents, index, glossary, amendments, change
  tables);
* hard negatives: the document's other pages that carry a heading path outside the section.

Skipped: titles with fewer than two content words or more than ``MAX_WORDS`` words (a
detected sentence, not a title), titles that name more than one section of the document
(ambiguous), sections over ``MAX_PAGES`` pages (a part, not a rule) and sections made only
of listing pages. ``sample`` takes a seeded, per-document share of them. Used to fit the
learned second stage (``evaluation.ltr_fit --mined``); see docs/experiments/ltr.md.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sourcepage.corpus.structure import SEP
from sourcepage.retrieval.tokenize import content_terms

#: page kinds that list other pages' content rather than state rules
LISTING = frozenset({"contents", "index", "glossary", "amendments", "change_table"})
MAX_PAGES = 6
MAX_WORDS = 16
_LABEL = (
    r"(?:section|sec\.?|s\.?|article|art\.?|regulation|reg\.?|rule|part|subpart|division|subdivision"
    r"|chapter|schedule|annex|appendix|clause|title|§+)"
)
_NUM = r"(?:\d+(?:\.\d+)*[A-Za-z]{0,2}(?:\([0-9A-Za-z]{1,4}\))*|[IVXLC]+|[A-Z])"
# "Article 10 ", "Subpart 2—", "s 44 ", "Part IV: "; or a bare number "44 ", "4.2.1 ", "1910.147(c) "
_NUMBER = re.compile(
    rf"^\s*(?:{_LABEL}\s*{_NUM}|\d+(?:\.\d+)*[A-Za-z]?(?:\([0-9A-Za-z]{{1,4}}\))*)\.?(?:\s*[—–\-:.)]\s*|\s+)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class MinedPair:
    """One pseudo-question: a section title, the pages of its section, and the pages of the
    document's other sections."""

    query: str
    doc_id: str
    section: str
    positives: tuple[str, ...]
    negatives: tuple[str, ...]


def strip_number(title: str) -> str:
    """The title without its leading number or label ("44 Duty of officers" → "Duty of
    officers"; "Article 10 Obligations …" → "Obligations …"; "Subpart 2—Duties" → "Duties")."""
    return _NUMBER.sub("", title, count=1).strip(" —–-:.")


def _page_no(page_id: str) -> int:
    return int(page_id.rpartition("#p")[2])


def _document_pairs(doc_id: str, pages: Mapping[str, tuple[list[str], str]]) -> list[MinedPair]:
    """The pairs of one document; ``pages`` maps page id → (heading paths, page kind)."""
    covers: dict[str, set[str]] = {}
    for pid, (paths, _) in pages.items():
        for path in paths:
            parts = path.split(SEP)
            for i in range(1, len(parts) + 1):
                covers.setdefault(SEP.join(parts[:i]), set()).add(pid)
    titles: dict[str, list[str]] = {}
    for path in covers:
        title = strip_number(path.split(SEP)[-1])
        titles.setdefault(title.casefold(), []).append(path)
    headed = {pid for pid, (paths, _) in pages.items() if paths}
    out = []
    for key, paths in sorted(titles.items()):
        if len(paths) != 1 or len(content_terms(key)) < 2 or len(key.split()) > MAX_WORDS:
            continue
        path = paths[0]
        pos = sorted((p for p in covers[path] if pages[p][1] not in LISTING), key=_page_no)
        if not pos or len(covers[path]) > MAX_PAGES:
            continue
        neg = sorted(headed - covers[path], key=_page_no)
        title = strip_number(path.split(SEP)[-1])
        out.append(MinedPair(title, doc_id, path, tuple(pos), tuple(neg)))
    return out


def mine_pairs(structure: Mapping[str, tuple[str, str, str]]) -> list[MinedPair]:
    """Every pair of every document of ``structure`` (``Store.page_structure()``: page id →
    (section, JSON list of heading paths, page kind)), in document then title order."""
    docs: dict[str, dict[str, tuple[list[str], str]]] = {}
    for pid, (_, secs, kind) in structure.items():
        doc = pid.rpartition("#p")[0]
        docs.setdefault(doc, {})[pid] = (json.loads(secs or "[]"), kind)
    return [p for doc in sorted(docs) for p in _document_pairs(doc, docs[doc])]


def sample(pairs: Sequence[MinedPair], per_document: int, seed: int = 42) -> list[MinedPair]:
    """At most ``per_document`` pairs of each document, drawn with a seeded shuffle (so that
    a long Act does not outweigh a short guide), in the input order."""
    by_doc: dict[str, list[int]] = {}
    for i, p in enumerate(pairs):
        by_doc.setdefault(p.doc_id, []).append(i)
    keep: set[int] = set()
    rng = random.Random(seed)
    for doc in sorted(by_doc):
        idx = list(by_doc[doc])
        rng.shuffle(idx)
        keep.update(idx[:per_document])
    return [p for i, p in enumerate(pairs) if i in keep]
