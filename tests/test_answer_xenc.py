"""The cross-encoder in the answer stage (issue #47 items 4–5): the selector's ``xenc``
features and P(supported)'s ``xenc_max`` / ``xenc_mean3`` are computed from the packaged
cross-encoder, follow relevance, and are read only by a model file that lists them."""

from __future__ import annotations

import numpy as np
import pytest

from sourcepage.query import PageHit, Query
from sourcepage.records import MANIFEST_COLUMNS, Document, Hit
from sourcepage.retrieval import vxmodels as V
from sourcepage.support import crossenc
from sourcepage.support.answer import extract_answer
from sourcepage.support.features import XENC_FEATURES as POLICY_XENC
from sourcepage.support.features import xenc_features
from sourcepage.support.policy import Policy, default_policy, reads_xenc
from sourcepage.support.select import (
    FEATURES,
    XENC_FEATURES,
    QuoteModel,
    add_xenc,
    candidates,
    featurise,
    quote_model,
)

GAS = "How often must a portable gas detector be calibrated?"
PLANK = "How far must scaffold planks extend over their end supports?"
PAGE = (
    "Scaffold planks shall extend over their end supports not less than 6 inches and not more "
    "than 12 inches.\n"
    "Guardrail systems shall be capable of withstanding a force of at least 200 pounds in any direction.\n"
    "Portable gas detectors shall be calibrated in accordance with the manufacturer's instructions "
    "and bump tested before each day's use.\n"
    "The employer shall keep records of the training given to each employee who works near energized parts."
)


def page_hit(page: str = "d#p1") -> PageHit:
    doc = Document(**{c: "" for c in MANIFEST_COLUMNS} | {"doc_id": page.split("#")[0]})
    return PageHit(Hit(1, page, 1.0, page + "#c1"), doc, "")


def _cands(question: str, names=XENC_FEATURES, n: int = 12):
    q = Query.parse(question)
    cands = candidates(q, [page_hit()], {"d#p1": (PAGE, False)})
    featurise(q, cands)
    add_xenc(q.text, cands, names, n=n)
    return cands


def _of(cands, start: str):
    return next(c for c in cands if c.text.startswith(start))


def test_xenc_is_computed_and_follows_relevance() -> None:
    gas, plank = _cands(GAS), _cands(PLANK)
    assert len(gas) == 4
    for cands, right in ((gas, "Portable gas"), (plank, "Scaffold planks")):
        best = _of(cands, right)
        others = [c for c in cands if c is not best]
        for name in ("xenc", "xenc_unit"):
            assert best.features[name] > max(c.features[name] for c in others) + 3.0
            assert best.features[f"{name}_gap"] == 0.0
            assert all(c.features[f"{name}_gap"] < -3.0 for c in others)
    # the same sentence read for another question: its logit moves with relevance
    assert _of(gas, "Scaffold").features["xenc"] < _of(plank, "Scaffold").features["xenc"] - 5.0
    # the logit is the cross-encoder's own, pair alone
    direct = V.cross_encoder().scores(GAS, [_of(gas, "Portable gas").text])[0]
    assert abs(_of(gas, "Portable gas").features["xenc_unit"] - direct) <= 1e-4


def test_only_the_first_units_are_read_and_the_rest_take_their_least() -> None:
    one = _cands(GAS, n=1)
    read = max(one, key=lambda c: c.features["share"])  # no cosines: the share orders them
    assert read.text.startswith("Portable gas")
    assert {c.features["xenc"] for c in one} == {read.features["xenc"]}
    assert all(c.features["xenc_gap"] == 0.0 for c in one)


def test_a_feature_the_model_does_not_list_is_not_computed() -> None:
    unit_only = _cands(GAS, names=("xenc_unit",))
    assert all(c.features["xenc"] == 0.0 for c in unit_only)
    assert any(c.features["xenc_unit"] != 0.0 for c in unit_only)
    q = Query.parse(GAS)
    cands = candidates(q, [page_hit()], {"d#p1": (PAGE, False)})
    featurise(q, cands)
    assert all(c.features[f] == 0.0 for c in cands for f in XENC_FEATURES)


def _model(features: tuple[str, ...], coef: tuple[float, ...]) -> QuoteModel:
    n = len(features)
    return QuoteModel(features, (0.0,) * n, (1.0,) * n, coef, -1.0, 0.5, 0.5)


def test_extract_answer_reads_xenc_when_the_model_lists_it() -> None:
    """A selector that reads the cross-encoder alone quotes the stating sentence first for
    either question, although both share the page's words alike."""
    zeros = lambda sents: {"e5": np.zeros(len(sents))}  # noqa: E731
    model = _model(("xenc", "xenc_gap"), (1.0, 1.0))
    for question, right in ((GAS, "Portable gas"), (PLANK, "Scaffold planks")):
        ans = extract_answer(
            Query.parse(question),
            [page_hit()],
            "answer",
            texts={"d#p1": (PAGE, False)},
            cosines=zeros,
            model=model,
        )
        assert ans["fact_found"] and ans["status"] == "answer"
        first = ans["quotes"][0]
        ((a, b),) = first["stating"]
        assert first["text"][a:b].startswith(right)


def test_policy_features_follow_relevance_and_are_cached() -> None:
    sents = [(s, 0.8) for s in PAGE.split("\n")]
    gas = xenc_features(GAS, sents)
    off = xenc_features("What is the maximum speed of a forklift in a warehouse aisle?", sents)
    assert set(gas) == set(POLICY_XENC)
    assert gas["xenc_max"] > off["xenc_max"] + 5.0 and gas["xenc_max"] >= gas["xenc_mean3"]
    assert xenc_features("q", []) == dict.fromkeys(POLICY_XENC, 0.0)
    cached = dict(crossenc.known())
    assert (GAS, sents[2][0], 128) in cached


def test_shipped_models_and_their_cross_encoder_features_agree() -> None:
    """What the shipped files list is what a search computes: the policy's cross-encoder
    features only when it reads one (``reads_xenc``); a policy file listing one loads."""
    pol = default_policy()
    assert reads_xenc() == bool(set(pol.classifier.features) & set(POLICY_XENC))
    d = pol.to_json()
    d["classifier"] = {**d["classifier"], "features": [*d["classifier"]["features"], "xenc_max"]}
    assert "xenc_max" in Policy.from_json(d).classifier.features
    d["classifier"]["features"].append("no_such_feature")
    with pytest.raises(ValueError, match="features"):
        Policy.from_json(d)
    qm = quote_model()
    assert qm is not None and set(qm.features) <= set(FEATURES)


def test_pairs_cut_to_a_smaller_bound_keep_their_final_separator() -> None:
    ce = V.cross_encoder()
    long = PAGE.replace("\n", " ") * 3
    short, full = ce.scores(GAS, [long], 32)[0], ce.scores(GAS, [long])[0]
    enc = ce.tokenizer.encode(GAS, long)
    cut = V._feed(enc, 32)["input_ids"][0]
    assert len(cut) == 32 and cut[-1] == enc.ids[-1] and short != full
