"""What every command module shares: the two consoles, the progress bar, ``fail``.

Rule for printing: text that comes from the user or the data (file names, error
messages, titles, questions, passages, citations such as ``[doc p.3]``) is never read
as rich markup. Print it as a ``Text``, with ``markup=False``, or ``escape`` it inside
a markup string.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.segment import Segment
from rich.text import Text

from sourcepage.retrieval.methods import METHOD_GRAMMAR

__all__ = [
    "METHOD_GRAMMAR",
    "RayAddressOpt",
    "RayOpt",
    "StoreOpt",
    "Text",
    "err",
    "escape",
    "fail",
    "terminal_safe",
    "out",
    "progress",
    "json_text",
    "ray_executor",
    "ticker",
]

#: control characters that data must never send to a terminal (C0 but tab and newline,
#: DEL, C1): ESC starts escape sequences (OSC 0 retitles the window, CSI 2J clears it)
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """``text`` without control characters (tab and newline stay)."""
    return CONTROL.sub("", text)


def json_text(obj: object) -> str:
    """``obj`` as indented JSON for a terminal: non-ASCII text kept readable, but DEL and
    the C1 controls (U+007F-U+009F: U+009B is an 8-bit CSI) escaped as ``\\u`` — JSON
    escapes only C0 itself, and a PDF's text reaches ``search --json``."""
    text = json.dumps(obj, ensure_ascii=False, indent=2)
    return re.sub(r"[\x7f-\x9f]", lambda m: f"\\u{ord(m.group()):04x}", text)


class SafeConsole(Console):
    """A rich Console that drops control characters from every piece of text it renders.

    Rich writes its own colours and cursor moves from styles and control segments after
    rendering, so filtering the text of the rendered segments removes exactly what came
    from the data (a PDF's text, a manifest's title) and nothing of rich's own; rich
    itself strips only BEL, BS, VT, FF and CR, and lets ESC through."""

    def render(self, renderable: Any, options: Any = None) -> Iterator[Segment]:
        for seg in super().render(renderable, options):
            if seg.control is None and CONTROL.search(seg.text):
                seg = Segment(terminal_safe(seg.text), seg.style)
            yield seg


# a pipe or a file gets a wide table rather than rich's 80-column default
out = SafeConsole(width=None if sys.stdout.isatty() else 160)
# messages are never folded: a path or an error line stays whole in a pipe or a log
err = SafeConsole(stderr=True, soft_wrap=True)

StoreOpt = Annotated[Path, typer.Option("--store", help="Store directory.")]
RayOpt = Annotated[
    bool, typer.Option("--ray", help="Run the jobs on Ray (a local cluster unless --ray-address).")
]
RayAddressOpt = Annotated[
    str | None, typer.Option("--ray-address", help="A running Ray cluster to join (implies --ray).")
]


def ray_executor(ray: bool, address: str | None) -> Any:
    """The Ray executor that ``--ray`` / ``--ray-address`` ask for, or None; a missing Ray
    package or an unreachable cluster ends the command with a clear message."""
    if not ray and address is None:
        return None
    from sourcepage.executor import make_executor

    try:
        return make_executor(f"ray:{address}" if address else "ray")
    except (ValueError, OSError, ConnectionError) as e:
        fail(f"cannot start Ray: {e}")


def progress() -> Progress:
    """Progress bars on stderr with elapsed time and an estimate of the time left, shown
    on a terminal (``ticker`` prints one line a step elsewhere)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=err,
        transient=False,
        disable=not err.is_terminal,
    )


def ticker(prog: Progress) -> Callable[[str, int, int], None]:
    """A ``progress(label, done, total)`` callback with one bar per label; when the bars
    are off (not a terminal: a log, a pipe) it prints a line when a step starts and one
    when it ends, with its time, so a long run is never silent. A total of 0 is a step of
    unknown length (a pulsing bar)."""
    from sourcepage.api import step_lines

    tasks: dict[str, Any] = {}
    lines = step_lines()

    def tick(label: str, done: int, total: int) -> None:
        if prog.disable:
            lines(label, done, total)
            return
        if label not in tasks:
            tasks[label] = prog.add_task(escape(label), total=total or None)
        prog.update(tasks[label], completed=done, total=total or None)

    return tick


def shorten(value: str, limit: int | None) -> str:
    """``value`` cut to ``limit`` characters, ending in "…" when cut (None: whole)."""
    return value if limit is None or len(value) <= limit else value[: limit - 1].rstrip() + "…"


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` (verbatim, never wrapped: a one-line message stays one
    line) on stderr and exit with ``code``."""
    err.print(Text.assemble(("error:", "bold red"), " ", message), highlight=False, soft_wrap=True)
    raise typer.Exit(code)
