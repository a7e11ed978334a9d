"""LSA: TF-IDF unigrams+bigrams → TruncatedSVD (256 dims, random_state 42) → L2 → cosine.

As the study (§3.4), fitted per text version on that version's chunks. Saved as
arrays (vocabulary, idf, SVD components, chunk vectors) plus params, not pickles.

The vocabulary keeps every unigram and the bigrams found in at least ``min_df`` (default 3)
chunks: a bigram of one chunk cannot relate two chunks, so it adds little to the latent
space, yet most bigrams are such (on the OSHA corpus they made 30k terms and each index
60 MB). The arrays are stored as float32 (the SVD itself is fitted in float64).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sourcepage.retrieval.tokenize import tokenize
from sourcepage.store.files import load_array

if TYPE_CHECKING:
    from sourcepage.retrieval.methods import Method
    from sourcepage.retrieval.settings import BuildContext, IndexSettings

# scikit-learn is imported inside the functions that need it, so that a process that
# never touches LSA (a one-shot bm25 search) does not pay for importing it.


@dataclass(frozen=True)
class LsaSettings:
    """LSA's settings (the method's ``settings_type``, experiment.yaml section ``lsa``)."""

    dims: int = 256
    #: the vocabulary keeps every unigram and the bigrams found in at least this many chunks
    min_df: int = 3


@dataclass
class LsaIndex:
    vectorizer: Any  # a fitted sklearn TfidfVectorizer
    components: np.ndarray  # (dims, n_terms)
    vectors: np.ndarray  # (n_chunks, dims), L2-normalised


def _l2(x: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norm == 0, 1.0, norm)


def _vectorizer(tokenizer: Callable[[str], list[str]], vocabulary: list[str] | None = None) -> Any:
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(
        tokenizer=tokenizer,
        lowercase=False,
        token_pattern=None,
        ngram_range=(1, 2),
        dtype=np.float64,
        vocabulary=vocabulary,
    )


def pruned_vocabulary(texts: list[str], tokenizer: Callable[[str], list[str]], min_df: int) -> list[str]:
    """Every unigram, and the bigrams found in at least ``min_df`` chunks, sorted."""
    from sklearn.feature_extraction.text import CountVectorizer

    cv = CountVectorizer(tokenizer=tokenizer, lowercase=False, token_pattern=None, ngram_range=(1, 2))
    x = cv.fit_transform(texts)
    df = np.asarray((x > 0).sum(axis=0)).ravel()
    return sorted(t for t, i in cv.vocabulary_.items() if " " not in t or df[i] >= min_df)


def build(
    texts: list[str],
    tokenizer: Callable[[str], list[str]],
    dims: int = LsaSettings.dims,
    seed: int = 42,
    min_df: int = LsaSettings.min_df,
) -> LsaIndex:
    """Fit TF-IDF (every unigram, the bigrams of at least ``min_df`` chunks) and SVD on
    ``texts``; dims shrink when the corpus is too small."""
    from sklearn.decomposition import TruncatedSVD

    vec = _vectorizer(tokenizer, pruned_vocabulary(texts, tokenizer, min_df) if min_df > 1 else None)
    x = vec.fit_transform(texts)
    k = max(1, min(dims, x.shape[0] - 1, x.shape[1] - 1))
    svd = TruncatedSVD(n_components=k, random_state=seed, algorithm="randomized")
    z = svd.fit_transform(x)
    return LsaIndex(vec, svd.components_.astype(np.float32), _l2(z).astype(np.float32))


def scores(index: LsaIndex, query: str) -> np.ndarray:
    """Cosine of the projected query with every chunk vector."""
    q = _l2(np.asarray(index.vectorizer.transform([query]) @ index.components.T, dtype=np.float32))
    return (index.vectors @ q[0]).astype(np.float64)


def save(index: LsaIndex, folder: Path) -> None:
    vocab = {t: int(i) for t, i in index.vectorizer.vocabulary_.items()}
    (folder / "lsa_vocab.json").write_text(json.dumps(vocab, ensure_ascii=False, sort_keys=True))
    np.save(folder / "lsa_idf.npy", index.vectorizer.idf_)
    np.save(folder / "lsa_components.npy", index.components)
    np.save(folder / "lsa_vectors.npy", index.vectors)


def load(folder: Path, tokenizer: Callable[[str], list[str]]) -> LsaIndex:
    vec = _vectorizer(tokenizer)
    vec.vocabulary_ = json.loads((folder / "lsa_vocab.json").read_text())
    vec.idf_ = load_array(folder / "lsa_idf.npy")
    vectors = load_array(folder / "lsa_vectors.npy", mmap=True)  # memory-mapped
    return LsaIndex(vec, load_array(folder / "lsa_components.npy"), vectors)


class LsaMethod:
    """The registered method ``lsa`` (``retrieval.methods``)."""

    kind = "lsa"
    grammar = "lsa"
    default_arg = ""
    summary = "TF-IDF 1–2 grams → truncated SVD → cosine"
    settings_type = LsaSettings

    def parse_arg(self, arg: str) -> str:
        if arg:
            raise ValueError(f"lsa takes no argument, got 'lsa:{arg}'")
        return ""

    def examples(self) -> list[str]:
        return ["lsa"]

    def settings(self, method: Method, settings: IndexSettings) -> dict[str, Any]:
        own = settings.of(self.kind)
        return {
            "tokenizer": asdict(settings.tokenizer),
            "dims": own.dims,
            "seed": settings.seed,
            "ngram_range": [1, 2],
            "min_df": own.min_df,
            "dtype": "float32",
        }

    def build(
        self, method: Method, texts: list[str], folder: Path, settings: IndexSettings, ctx: BuildContext
    ) -> None:
        tok = lambda t: tokenize(t, settings.tokenizer)  # noqa: E731
        own = settings.of(self.kind)
        save(build(texts, tok, own.dims, settings.seed, own.min_df), folder)

    def load(self, method: Method, folder: Path, settings: IndexSettings) -> LsaIndex:
        return load(folder, lambda t: tokenize(t, settings.tokenizer))

    def scores(self, method: Method, model: LsaIndex, query: str, settings: IndexSettings) -> np.ndarray:
        return scores(model, query)


METHOD = LsaMethod()
