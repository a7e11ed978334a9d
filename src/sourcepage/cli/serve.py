"""``sourcepage serve`` (the JSON API and the reviewer web page) and ``sourcepage
reviewer`` (the accounts that may write through it)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from sourcepage.cli._common import StoreOpt, err, escape, fail, out

reviewer_app = typer.Typer(
    no_args_is_help=True,
    help="Reviewer accounts: who may record reviews, judgments and adjudications through `serve`.",
)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def serve(
    store: StoreOpt = Path(".store"),
    host: Annotated[
        str, typer.Option(help="Address to bind; 127.0.0.1 (default) serves this machine only.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8000,
    corpus: Annotated[
        Path | None,
        typer.Option("--corpus", help="Corpus folder for page images (default: the store's last ingest)."),
    ] = None,
    questions: Annotated[
        Path | None, typer.Option("--questions", help="questions.jsonl to pool and judge on the web page.")
    ] = None,
    public: Annotated[
        bool,
        typer.Option(
            "--public",
            help="Serve other machines (binds 0.0.0.0 unless --host is given); every request then needs a "
            "reviewer token. Refuses to start without reviewer accounts.",
        ),
    ] = False,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option("--allowed-host", help="Host name clients use to reach the service; repeatable."),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(min=1, help="Worker processes (searches are CPU-bound: one per core; 1: this process)."),
    ] = 1,
) -> None:
    """Serve the JSON API and the reviewer web page (http://HOST:PORT/, API docs at /docs)."""
    import os

    import uvicorn

    from sourcepage.service import app as A
    from sourcepage.store.db import StoreError

    hosts = list(allowed_host or [])
    if public and _loopback(host):
        host = "0.0.0.0"
    if not public and not _loopback(host):
        fail(f"--host {host} serves other machines: add --public (every request then needs a reviewer token)")
    if public:
        if host in ("0.0.0.0", "::") and not hosts:
            fail("--public on all addresses needs --allowed-host NAME (the host name clients use)")
        if host not in ("0.0.0.0", "::"):
            hosts.append(host)
    try:
        web = A.create_app(store, corpus=corpus, questions=questions, public=public, allowed_hosts=hosts)
    except (StoreError, ValueError, OSError) as e:
        fail(str(e))
    if web.state.corpus is None:
        err.print("[yellow]warning:[/] no corpus folder known: page images are off (pass --corpus DIR)")
    where = "other machines too: every request needs a reviewer token" if public else "this machine only"
    out.print(
        f"serving {store} on http://{host}:{port}/ ({where}; API docs at /docs). Writing needs a reviewer "
        f"token: `sourcepage reviewer add NAME --store {store}`.",
        markup=False,
    )
    if workers <= 1:
        uvicorn.run(web, host=host, port=port, log_level="info")
        return
    # each worker process builds its own app (the factory reads these)
    os.environ[A.ENV_STORE] = str(Path(store).resolve())
    os.environ[A.ENV_CORPUS] = str(web.state.corpus or "")
    os.environ[A.ENV_QUESTIONS] = str(Path(questions).resolve()) if questions else ""
    os.environ[A.ENV_PUBLIC] = "1" if public else ""
    os.environ[A.ENV_HOSTS] = ",".join(hosts)
    os.environ[A.ENV_SERVER_PID] = str(os.getpid())
    uvicorn.run(
        "sourcepage.service.app:app_from_env",
        factory=True,
        workers=workers,
        host=host,
        port=port,
        log_level="warning",
    )


@reviewer_app.command("add")
def reviewer_add(
    name: Annotated[str, typer.Argument(help="Reviewer name (recorded with every review and judgment).")],
    store: StoreOpt = Path(".store"),
    role: Annotated[
        list[str] | None,
        typer.Option(
            "--role",
            help="editor: may also add, replace, withdraw and restore documents from the web page; "
            "reviewer: reviews only. Default: an existing account keeps its roles.",
        ),
    ] = None,
) -> None:
    """Create a reviewer (or give one a new token) and print the token, once."""
    from sourcepage.store.db import Store, StoreError
    from sourcepage.store.reviewers import add_reviewer, reviewer_roles

    roles = None if role is None else [r for r in role if r != "reviewer"]
    try:
        Store(store).close()
        token = add_reviewer(store, name, roles)
    except (StoreError, ValueError, OSError) as e:
        fail(str(e))
    held = reviewer_roles(store, name)
    out.print(f"reviewer {name}{' (' + ', '.join(held) + ')' if held else ''}: token {token}", markup=False)
    err.print(
        "Shown once; the store keeps only its hash. Send it as `Authorization: Bearer TOKEN` or sign in at "
        "/login. Adding the name again replaces it.",
        markup=False,
    )


@reviewer_app.command("remove")
def reviewer_remove(
    name: Annotated[str, typer.Argument(help="Reviewer name.")], store: StoreOpt = Path(".store")
) -> None:
    """End a reviewer's access (the reviews and judgments they recorded stay)."""
    from sourcepage.store.reviewers import remove_reviewer

    if not remove_reviewer(store, name):
        fail(f"no reviewer {name!r} in {store}")
    out.print(f"removed reviewer {name}", markup=False)


@reviewer_app.command("list")
def reviewer_list(store: StoreOpt = Path(".store")) -> None:
    """The reviewer accounts of a store."""
    from sourcepage.store.reviewers import list_reviewers

    t = Table(title=f"Reviewers — {escape(str(store))}")
    t.add_column("name")
    t.add_column("token issued")
    t.add_column("roles")
    for r in list_reviewers(store):
        t.add_row(escape(r.name), r.created_at, ", ".join(r.roles) or "reviewer")
    out.print(t)
