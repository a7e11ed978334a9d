"""How ``sourcepage search`` prints an answer's quotes: the passage, its chosen sentences,
the citation and the heading the quote stands under."""

from __future__ import annotations

from sourcepage.cli._common import Text, out, shorten
from sourcepage.corpus.structure import last_heading


def print_quotes(res: dict) -> None:
    """The answer's supporting quotes (or the reviewer's draft quotes) with citations: on a
    terminal the whole passage, its chosen sentences in bold; without styles (a pipe, a
    file) only the chosen sentences, so the quotation marks never hold context read as quote."""
    ans = res.get("answer") or {}
    if ans.get("quotes"):
        label = "supporting quotes" if ans["status"] == "answer" else "draft quotes for the reviewer"
        found = "" if ans.get("fact_found", True) else f" — none states what was asked: {ans['asked']}"
        out.print(Text(f"\n{label}{found}:", style="bold"))
        if first_note(res):
            out.print(Text(f"  ({first_note(res)})", style="dim"), highlight=False)
        several = len({q.get("jurisdiction") for q in ans["quotes"]}) > 1  # a comparison's sides
        for q in ans["quotes"]:
            spans = [tuple(s) for s in q.get("spans", [])]
            cite = q["citation"] + (f" ({q.get('jurisdiction')})" if several else "") + _under(q) + _risk(q)
            if spans and (out.no_color or not out.is_terminal):
                out.print(Text(f"  \u201c{chosen(q['text'], spans)}\u201d {cite}"), highlight=False)
                continue
            line = Text(f"  \u201c{q['text']}\u201d {cite}")
            for a, b in spans:  # the chosen sentences of the passage, in bold
                line.stylize("bold", a + 3, b + 3)
            out.print(line, highlight=False)


def first_note(res: dict) -> str:
    """Why the first quote is not from the top page, when it is not ('' when it is): the
    first quote is the sentence judged to state what is asked (``support.answer``)."""
    quotes, results = (res.get("answer") or {}).get("quotes") or [], res.get("results") or []
    first, top = (quotes[0].get("page"), results[0].get("page")) if quotes and results else (None, None)
    if not first or not top or first == top:
        return ""
    rank = next((r.get("rank") for r in results if r.get("page") == first), None)
    ranked = f", ranked {rank}," if rank else ""
    return (
        f"the first quote is from {first}{ranked} not from the top page {top}:"
        " its sentence is the one judged to state what is asked"
    )


def chosen(text: str, spans: list[tuple[int, int]]) -> str:
    """The spans of ``text`` in order, "…" where text lies between or around them."""
    parts, end = [], 0
    for a, b in sorted(spans):
        if text[end:a].strip():
            parts.append("…")
        parts.append(text[a:b].strip())
        end = b
    if text[end:].strip():
        parts.append("…")
    return " ".join(parts)


def _under(q: dict) -> str:
    """ " · " and the last heading of the quote's section path, cut to 60 characters ('' none)."""
    last = last_heading(q.get("section") or "")
    return f" · {shorten(last, 60)}" if last else ""


def _risk(q: dict) -> str:
    """The web page's flag in words: the page's columns run together in its extracted text,
    so the quote may join two columns' lines ('' when the layout is safe)."""
    return " · check on the page image: its columns run together in the text" if q.get("layout_risk") else ""
