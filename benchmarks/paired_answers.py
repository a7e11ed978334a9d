"""Two variants' whole searches over the same questions, paired question by question.

    python benchmarks/paired_answers.py --pair BASE.json NEW.json [--pair …] \
        [--names fp32 int8] [--out paired.json]

Each file is written by ``benchmarks/decisions.py --out`` (one question set on one store);
every ``--pair`` is the same questions under the two variants (e.g. the e5 table and the
question vectors in fp32, then in int8: ``SOURCEPAGE_E5=int8`` on a copy of the store).
The questions of all pairs are pooled. Per question, the outcomes a person gets:

- ``good``: an answerable question with labelled excerpts answered with a quote that
  states one (``evaluation.answers``: at least 60% of an excerpt's content words);
- ``wrong``: an answer without such a quote, or any answer to an unsupported or
  out-of-domain question;
- the decision (answer / review / refuse).

Printed: the counts of each variant, the paired difference of answer recall (good ÷
answerable with excerpts) and of wrong answers (÷ questions) with 95% paired bootstrap
intervals (seed 42), McNemar's exact test on the good answers, and the questions whose
decision or outcome changed. A change whose interval holds 0 is within noise.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sourcepage.evaluation.stats import mcnemar_exact, paired_bootstrap_ci
from sourcepage.store.files import write_json


def outcomes(path: Path) -> dict[str, dict]:
    """question id (prefixed by its set's file stem) → its class, decision, good and wrong."""
    res = json.loads(path.read_text(encoding="utf-8"))
    name = Path(res["questions"]).parent.name
    out = {}
    for r in res["rows"]:
        answered = r["decision"] == "answer"
        labelled = r["class"] == "answerable" and r["stating"] is not None
        out[f"{name}/{r['id']}"] = {
            "class": r["class"],
            "decision": r["decision"],
            "labelled": labelled,
            "good": labelled and answered and bool(r["stating"]),
            "wrong": answered and not (r["class"] == "answerable" and bool(r["stating"])),
        }
    return out


def compare(pairs: list[tuple[Path, Path]], names: tuple[str, str]) -> dict:
    a, b = {}, {}
    for base, new in pairs:
        x, y = outcomes(base), outcomes(new)
        if set(x) != set(y):
            raise SystemExit(f"{base} and {new} hold different questions")
        a |= x
        b |= y
    ids = sorted(a)
    lab = [q for q in ids if a[q]["labelled"]]
    good_a, good_b = [float(a[q]["good"]) for q in lab], [float(b[q]["good"]) for q in lab]
    wrong_a, wrong_b = [float(a[q]["wrong"]) for q in ids], [float(b[q]["wrong"]) for q in ids]
    d_recall = paired_bootstrap_ci(good_b, good_a, n_resamples=5000)
    d_wrong = paired_bootstrap_ci(wrong_b, wrong_a, n_resamples=5000)
    changed = [
        {
            "id": q,
            names[0]: a[q]["decision"],
            names[1]: b[q]["decision"],
            "good": [a[q]["good"], b[q]["good"]],
            "wrong": [a[q]["wrong"], b[q]["wrong"]],
        }
        for q in ids
        if (a[q]["decision"], a[q]["good"], a[q]["wrong"]) != (b[q]["decision"], b[q]["good"], b[q]["wrong"])
    ]

    def counts(o: dict) -> dict:
        return {
            "answers": sum(o[q]["decision"] == "answer" for q in ids),
            "good": sum(o[q]["good"] for q in lab),
            "wrong": sum(o[q]["wrong"] for q in ids),
        }

    return {
        "questions": len(ids),
        "labelled_answerable": len(lab),
        names[0]: counts(a),
        names[1]: counts(b),
        "recall_difference": [round(v, 4) for v in d_recall],
        "wrong_difference": [round(v, 4) for v in d_wrong],
        "mcnemar_good": mcnemar_exact([bool(v) for v in good_a], [bool(v) for v in good_b]),
        "decisions_changed": sum(a[q]["decision"] != b[q]["decision"] for q in ids),
        "changed": changed,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", nargs=2, type=Path, action="append", required=True, metavar=("BASE", "NEW"))
    ap.add_argument("--names", nargs=2, default=["base", "new"])
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    res = compare([tuple(p) for p in a.pair], tuple(a.names))
    if a.out:
        write_json(a.out, res)
    print(json.dumps({k: v for k, v in res.items() if k != "changed"}, indent=1))
    for c in res["changed"]:
        print(json.dumps(c))


if __name__ == "__main__":
    main()
