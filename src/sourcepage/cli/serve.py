"""``sourcepage serve``: the JSON API and the reviewer web page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sourcepage.cli._common import StoreOpt, err, fail, out


def serve(
    store: StoreOpt = Path(".store"),
    host: Annotated[str, typer.Option(help="Address to bind (127.0.0.1: this machine only).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8000,
    corpus: Annotated[
        Path | None,
        typer.Option("--corpus", help="Corpus folder for page images (default: the store's last ingest)."),
    ] = None,
    questions: Annotated[
        Path | None, typer.Option("--questions", help="questions.jsonl to pool and judge on the web page.")
    ] = None,
    workers: Annotated[
        int, typer.Option(help="Worker processes (searches are CPU-bound: one per core; 1: this process).")
    ] = 1,
) -> None:
    """Serve the JSON API and the reviewer web page (http://HOST:PORT/, API docs at /docs)."""
    import os

    import uvicorn

    from sourcepage.service.app import ENV_CORPUS, ENV_QUESTIONS, ENV_STORE, create_app
    from sourcepage.store.db import StoreError

    try:
        web = create_app(store, corpus=corpus, questions=questions)
    except (StoreError, ValueError, OSError) as e:
        fail(str(e))
    if web.state.corpus is None:
        err.print("[yellow]warning:[/] no corpus folder known: page images are off (pass --corpus DIR)")
    out.print(
        f"serving {store} on http://{host}:{port}/  (API docs: http://{host}:{port}/docs)", markup=False
    )
    if workers <= 1:
        uvicorn.run(web, host=host, port=port, log_level="info")
        return
    # each worker process builds its own app (the factory reads these)
    os.environ[ENV_STORE] = str(Path(store).resolve())
    os.environ[ENV_CORPUS] = str(web.state.corpus or "")
    os.environ[ENV_QUESTIONS] = str(Path(questions).resolve()) if questions else ""
    uvicorn.run(
        "sourcepage.service.app:app_from_env",
        factory=True,
        workers=workers,
        host=host,
        port=port,
        log_level="warning",
    )
