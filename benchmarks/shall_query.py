# ruff: noqa  (an experiment script run as it was measured: late imports patch modules first)
"""Dev-only experiment: a question's "must" also asks BM25 for "shall" (rules are written with
"shall", recitals with "should"). Arguments are those of ``sourcepage eval``.
"""
import sys

from sourcepage.retrieval import bm25

_tok = bm25.tokenize
def tokenize(text, config=None):
    out = _tok(text, config) if config is not None else _tok(text)
    if "must" in out and "shall" not in out:
        out = out + ["shall"]
    return out
bm25.tokenize = tokenize
from sourcepage.cli import main

sys.argv = ["sourcepage", "eval"] + sys.argv[1:]
main()
