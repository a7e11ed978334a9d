"""Which of the chosen quotes an *answer* should show (dev only; the gate is not changed).

    python benchmarks/answer_quotes.py --cache DIR --set STORE=QUESTIONS [--set …]

Reads the rows ``fit_quotes.py --collect-only --cache DIR`` collected (the candidates of
each dev question's top three pages, with features and labels), gives every candidate its
out-of-fold P(states) from the shipped selector's features and C (5 folds by question,
seed 42; on the rows' unit labels, as the selector was trained when this was run,
before ``fit_quotes.py --labels passage``), answers with the thresholds shipped then
(``--t-support 0.9266 --t-quote 0.1756``), and compares, over the answered answerable
questions with a labelled excerpt, what each variant would show as the answer's quotes:

- ``answer precision``: answers whose quotes hold a stating passage (the eval rule: 60%
  of one excerpt's content words), ÷ answers;
- ``first states``: answers whose first quote states; ``all state``: answers whose every
  quote states; ``per quote``: stating quotes ÷ quotes shown;
- ``points``: answer points covered by the quotes shown (``support.check.point_covered``);
- ``quotes``: the mean number of quotes an answer shows.

The rule to choose by was written before the run: the highest ``per quote`` among the
variants that lose at most one stating answer against today's and whose ``points`` fall by
at most 0.03.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fit_quotes import _text_features, out_of_fold, quotes_of, split_probs  # noqa: E402

from sourcepage.evaluation.answers import contains_key_fact  # noqa: E402
from sourcepage.evaluation.questions import read_questions  # noqa: E402
from sourcepage.support import select as S  # noqa: E402
from sourcepage.support.answer import Passage, carrying, stated  # noqa: E402
from sourcepage.support.check import point_covered  # noqa: E402


def _carries(p: Passage) -> bool:
    """The passage's best unit may carry the answer: not another party's duty, no layout risk."""
    c = p.units[0]
    return not c.risk and not c.other_party


def _best_p(p: Passage) -> float:
    return max(u.p for u in p.units)


def _value(p: Passage) -> bool:
    """The passage holds the unit quoted for the value the question asks for ("how often")."""
    return any(u.features.get("value_asked") and u.features.get("value_stated") for u in p.units)


def variants(t_quote: float) -> dict[str, Callable[[list[Passage]], list[Passage]]]:
    """Variant name → which of an answer's passages it shows (the first is always the best)."""

    def keep(ps: list[Passage], ok: Callable[[Passage, float], bool]) -> list[Passage]:
        if not ps:
            return ps
        best = _best_p(ps[0])
        return [ps[0]] + [p for p in ps[1:] if ok(p, best)]

    return {
        "today (all chosen)": lambda ps: ps,
        "carrying only": lambda ps: keep(ps, lambda p, b: _carries(p)),
        "carrying, p >= t_quote": lambda ps: keep(ps, lambda p, b: _carries(p) and _best_p(p) >= t_quote),
        "carrying, p >= 0.75 best": lambda ps: keep(ps, lambda p, b: _carries(p) and _best_p(p) >= 0.75 * b),
        "best only": lambda ps: ps[:1],
        # added after the first five were run (the asked-value quote can fall under t_quote)
        "carrying, p >= t_quote or value": lambda ps: keep(
            ps, lambda p, b: _carries(p) and (_best_p(p) >= t_quote or _value(p))
        ),
        "… and the value quote first": lambda ps: sorted(
            keep(ps, lambda p, b: _carries(p) and (_best_p(p) >= t_quote or _value(p))),
            key=lambda p: not _value(p) if any(_value(x) for x in ps[1:]) else 0,
        ),
        "shipped (support.answer.carrying)": lambda ps: carrying(ps, t_quote),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--set", action="append", required=True, help="STORE=QUESTIONS (as collected)")
    ap.add_argument("--t-support", type=float, default=0.9266, help="the gate's P(supported) threshold")
    ap.add_argument("--t-quote", type=float, default=0.1756, help="the gate's P(states) threshold")
    a = ap.parse_args()
    rows: list[dict[str, Any]] = []
    for pair in a.set:
        store, _, qpath = pair.partition("=")
        part = a.cache / (Path(store).name + "-" + Path(qpath).stem + ".partial.jsonl")
        rows += [json.loads(x) for x in part.read_text().splitlines()]
    _text_features(rows)
    model = S.quote_model()
    assert model is not None
    probs = split_probs(rows, out_of_fold(rows, list(model.features), 0.1))
    questions = {(p, q.id): q for p in {r["set"] for r in rows} for q in read_questions(Path(p))}
    table: dict[str, dict[str, list[float]]] = {}
    for r, p in zip(rows, probs, strict=True):
        units, ps = quotes_of(r, p)
        answered = (
            not r["blocked"] and (r["probability"] or 0.0) >= a.t_support and stated(units) >= a.t_quote
        )
        q = questions[r["set"], r["id"]]
        if not answered or r["class"] != "answerable" or not r["has_excerpt"]:
            continue
        for name, pick in variants(a.t_quote).items():
            shown = pick(ps)
            m = [contains_key_fact([x.text], q) for x in shown]
            joined = " ".join(x.text for x in shown)
            pts = [point_covered(t, joined) for t in q.answer_points]
            t = table.setdefault(
                name, {k: [] for k in ("any", "first", "all", "quotes", "stating", "points")}
            )
            t["any"].append(any(m))
            t["first"].append(bool(m and m[0]))
            t["all"].append(bool(m) and all(m))
            t["quotes"].append(len(m))
            t["stating"].append(sum(m))
            t["points"].append(sum(pts) / len(pts) if pts else 0.0)
    print(f"{'variant':28} answers  precision  first states  all state  per quote  points  quotes")
    for name, t in table.items():
        n = len(t["any"])
        print(
            f"{name:28} {n:7}  {np.mean(t['any']):.3f}      {np.mean(t['first']):.3f}         "
            f"{np.mean(t['all']):.3f}      {sum(t['stating']) / sum(t['quotes']):.3f}      "
            f"{np.mean(t['points']):.3f}   {np.mean(t['quotes']):.2f}"
        )


if __name__ == "__main__":
    main()
