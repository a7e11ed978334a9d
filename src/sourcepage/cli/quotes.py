"""How ``sourcepage search`` prints an answer's quotes: the passage, its chosen sentences,
the citation and the heading the quote stands under."""

from __future__ import annotations

from sourcepage.cli._common import Text, out, shorten
from sourcepage.corpus.structure import last_heading


def print_quotes(res: dict) -> None:
    """The answer's supporting quotes (or the reviewer's draft quotes) with citations, each
    whole (never elided: a quote is whole sentences under one heading, "[…]" where it leaves
    page text out), the sentence judged to state the answer marked — bold and underlined on
    a terminal, between ** without styles (a pipe, a file) — and the other chosen sentences
    in bold on a terminal."""
    ans = res.get("answer") or {}
    if ans.get("quotes"):
        label = "supporting quotes" if ans["status"] == "answer" else "draft quotes for the reviewer"
        found = "" if ans.get("fact_found", True) else f" — none states what was asked: {ans['asked']}"
        out.print(Text(f"\n{label}{found}:", style="bold"))
        if first_note(res):
            out.print(Text(f"  ({first_note(res)})", style="dim"), highlight=False)
        several = len({q.get("jurisdiction") for q in ans["quotes"]}) > 1  # a comparison's sides
        plain = out.no_color or not out.is_terminal
        for q in ans["quotes"]:
            cite = q["citation"] + (f" ({q.get('jurisdiction')})" if several else "") + _under(q) + _risk(q)
            out.print(quote_line(q, plain, cite), highlight=False)


def quote_line(q: dict, plain: bool, cite: str = "") -> Text:
    """One quote as printed: "  “text” cite", its ``stating`` span marked (``plain``: between
    **, else bold and underlined) and, on a terminal, its other chosen sentences in bold."""
    text, stating = q["text"], sorted(tuple(s) for s in q.get("stating") or [])
    if plain:
        for a, b in reversed(stating):
            text = f"{text[:a]}**{text[a:b]}**{text[b:]}"
        return Text(f"  \u201c{text}\u201d {cite}".rstrip())
    line = Text(f"  \u201c{text}\u201d {cite}".rstrip())
    for a, b in q.get("spans") or []:
        if (a, b) not in stating:
            line.stylize("bold", a + 3, b + 3)
    for a, b in stating:
        line.stylize("bold underline", a + 3, b + 3)
    return line


def first_note(res: dict) -> str:
    """Why the first quote is not from the top page, when it is not ('' when it is): the
    answer's ``first_quote`` (``support.answer.first_quote``) in words."""
    ans = res.get("answer") or {}
    quotes, results = ans.get("quotes") or [], res.get("results") or []
    first, top = (quotes[0].get("page"), results[0].get("page")) if quotes and results else (None, None)
    if not first or not top or first == top:
        return ""
    rank = next((r.get("rank") for r in results if r.get("page") == first), None)
    ranked = f", ranked {rank}," if rank else ""
    why = (ans.get("first_quote") or {}).get("why") or "its sentence is the one judged to state what is asked"
    return f"the first quote is from {first}{ranked} not from the top page {top}: {why}"


def _under(q: dict) -> str:
    """ " · " and the last heading of the quote's section path, cut to 60 characters ('' none)."""
    last = last_heading(q.get("section") or "")
    return f" · {shorten(last, 60)}" if last else ""


def _risk(q: dict) -> str:
    """The web page's flag in words: the page's columns run together in its extracted text,
    so the quote may join two columns' lines ('' when the layout is safe)."""
    return " · check on the page image: its columns run together in the text" if q.get("layout_risk") else ""
