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


def content_terms(text: str) -> set[str]:
    """The content words of a question or passage: tokens without stop words and without
    the one-letter words "a" and "i" (kept by the BM25 tokenizer for "Class I", dropped
    here). The one definition used for highlighting, question coverage and quote scoring."""
    return set(tokenize(text, _CONTENT)) - {"a", "i"}
