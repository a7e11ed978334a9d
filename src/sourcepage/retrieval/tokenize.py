"""The tokenizer shared by BM25 and LSA.

Written by hand (not bm25s's default splitter, which drops one-character tokens and
splits decimals) because safety text hinges on tokens generic tokenizers lose:
"Class I", "Zone 1", "29 CFR 1910.147(c)(4)", "1/4 inch". Rules, case-folded:

- numbers keep their inner dots, slashes and commas: ``1910.147``, ``1/4``, ``1,000``;
- a section reference keeps its compound form and its parts: ``1910.147(c)(4)`` gives
  ``1910.147(c)(4)``, ``1910.147``, ``c``, ``4``;
- words are runs of Unicode letters (Spanish accents kept), apostrophes inside words
  kept (``employer's``); one-character tokens are kept;
- stop words (bm25s's English list) and Snowball stemming (PyStemmer) are optional.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

_REF = re.compile(r"\d+(?:\.\d+)+(?:\([0-9a-z]+\))+")
_TOKEN = re.compile(r"\d+(?:[.,/]\d+)*|[^\W\d_]+(?:['’][^\W\d_]+)*")


@dataclass(frozen=True)
class TokenizerConfig:
    """Tokenizer switches; the defaults keep every token and do not stem."""

    stopwords: bool = False
    stem: bool = False

    def as_dict(self) -> dict[str, bool]:
        return asdict(self)


@lru_cache(maxsize=1)
def _stopwords() -> frozenset[str]:
    # keep the one-letter words that name classes and divisions ("Class I", "Type A")
    return frozenset(_bm25s_stopwords()) - {"a", "i"}


def _bm25s_stopwords() -> tuple[str, ...]:
    """bm25s's English stop words, read from its ``stopwords`` module file without importing
    the ``bm25s`` package (whose ``__init__`` imports numba: ~0.2 s for every search)."""
    import importlib.util

    spec = importlib.util.find_spec("bm25s")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("bm25s is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "stopwords.py"
    module_spec = importlib.util.spec_from_file_location("_sourcepage_bm25s_stopwords", path)
    if module_spec is None or module_spec.loader is None:
        raise ImportError(f"cannot read {path}")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return tuple(module.STOPWORDS_EN)


@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer

    return Stemmer.Stemmer("english")


def tokenize(text: str, config: TokenizerConfig = TokenizerConfig()) -> list[str]:
    """Tokens of ``text`` under ``config`` (see the module docstring for the rules)."""
    text = text.lower()
    out: list[str] = []
    pos = 0
    for ref in _REF.finditer(text):
        out.extend(_TOKEN.findall(text, pos, ref.start()))
        out.append(ref.group(0))
        out.extend(_TOKEN.findall(ref.group(0)))
        pos = ref.end()
    out.extend(_TOKEN.findall(text, pos))
    out = [t.replace("’", "'") for t in out]
    if config.stopwords:
        sw = _stopwords()
        out = [t for t in out if t not in sw]
    if config.stem:
        out = _stemmer().stemWords(out)
    return out


_CONTENT = TokenizerConfig(stopwords=True)

#: words that shape a question or a sentence but say nothing about its topic ("How often
#: must …", "What do we need to …", "he has", "each", "about"), beyond bm25s's 33 English
#: stop words: never content words, so never highlighted or matched
QUESTION_WORDS = frozenset(
    "what which who whom whose when where why how often much many does did do done doing must need "
    "needs needed should would could can can't cannot may might shall will ever kind kinds type types "
    "sort way ways we us our ours i me my mine you your yours one he him his she her hers they them "
    "theirs its it's itself have has had having get gets got go goes going make makes made now right "
    "about each every once given also just any anyone anything some someone something all both either "
    "neither other others own same so than too very again further here only more most less least "
    "from up down out over under between through after before during while until because".split()
)


def content_terms(text: str) -> set[str]:
    """The content words of a question or passage: tokens without stop words, without the
    words that only shape a question (``QUESTION_WORDS``: "what", "how", "often", "each", …)
    and without the one-letter words "a" and "i" (kept by the BM25 tokenizer for "Class I",
    dropped here). The one definition used for highlighting, question coverage and quote
    scoring."""
    return set(tokenize(text, _CONTENT)) - QUESTION_WORDS - {"a", "i"}


def stem_terms(terms: set[str] | list[str]) -> dict[str, str]:
    """term → its Snowball stem (so "inspected" matches "inspection" when quotes are
    scored; retrieval itself does not stem by default)."""
    ts = sorted(terms)
    return dict(zip(ts, _stemmer().stemWords(ts), strict=True))


def highlight_spans(passage: str, terms: set[str]) -> list[tuple[int, int]]:
    """Character spans of ``passage`` whose word is a query term (case-insensitive)."""
    return [
        (m.start(), m.end())
        for m in re.finditer(r"[^\W_]+(?:['’][^\W_]+)?", passage)
        if m.group(0).lower().replace("’", "'") in terms
    ]
