"""Lines ``search`` prints beside the ranked pages: what the reviewer's desk adds (a reviewed
answer, or where a referral is followed) and the near-duplicate pages folded under those
shown, which the ranks count."""

from __future__ import annotations

from sourcepage.cli._common import Text, out


def reviewed_here(res: dict) -> bool:
    """Whether a reviewer answered this very question (not a near-duplicate of it): then the
    reviewed answer is the answer, and the system's draft is not printed as one."""
    return (res.get("reviewed") or {}).get("match") == "same question"


def desk_lines(res: dict) -> None:
    """What the reviewer's desk adds: a reviewed answer, or where the referral is followed."""
    rv = res.get("reviewed")
    if rv:
        near = (
            ""
            if rv["match"] == "same question"
            else f" to {rv['question']!r} (similarity {rv['similarity']:.2f})"
        )
        out.print(
            Text(
                f"reviewed answer{near}: {rv['decision']} by {rv['reviewer']} on {rv['decided_at'][:10]}",
                style="bold green",
            )
        )
        if rv["answer"]:
            out.print(Text("  " + rv["answer"]))
        for q in rv.get("quotes", []):
            out.print(Text(f"  \u201c{q}\u201d"))
        if rv["pages"]:
            out.print(Text("  sources: " + ", ".join(rv["pages"]), style="dim"))
    elif res.get("referral"):
        ref = res["referral"]
        out.print(
            Text(
                f"referred to the reviewer's desk as question #{ref['id']} (serve it: {ref['url']};"
                " `sourcepage desk` lists the queue)",
                style="yellow",
            )
        )


def folded_line(res: dict) -> None:
    """The near-duplicate pages folded under the pages shown (the ranks count them, so they
    skip: issue 49); nothing when none was folded."""
    folded = [(d, r) for r in res["results"] for d in r.get("duplicates", [])]
    if not folded:
        return
    n = len(folded)
    each = "; ".join(f"{d['page']} (rank {d['rank']}) under {r['page']}" for d, r in folded)
    line = f"{n} near-duplicate page{'s' * (n != 1)} folded under the pages shown (the ranks count them)"
    out.print(Text(f"{line}: {each}", style="dim"), highlight=False)
