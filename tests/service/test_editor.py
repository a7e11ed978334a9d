"""The editor: a reviewer with the ``editor`` role adds, replaces, withdraws and restores
documents from the web page (issue 50, item 2). Roles first (``store.reviewers``), then
the routes by real requests on a copied store."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from sourcepage.cli import app as cli
from sourcepage.store.db import Store
from sourcepage.store.reviewers import EDITOR, add_reviewer, list_reviewers, reviewer_roles


def test_an_editor_role_is_given_kept_and_taken_away(tmp_path: Path) -> None:
    """``add_reviewer(roles=...)`` gives roles, ``None`` keeps them on a new token, ``()``
    takes them; an unknown role is refused; the CLI says and lists them."""
    store = tmp_path / "store"
    Store(store, create=True).close()
    add_reviewer(store, "ada", [EDITOR])
    add_reviewer(store, "bo")
    assert reviewer_roles(store, "ada") == (EDITOR,) and reviewer_roles(store, "bo") == ()
    add_reviewer(store, "ada")  # a new token keeps the roles
    assert reviewer_roles(store, "ada") == (EDITOR,)
    add_reviewer(store, "ada", ())
    assert reviewer_roles(store, "ada") == () and reviewer_roles(store, "nobody") == ()
    try:
        add_reviewer(store, "cy", ["admin"])
        raise AssertionError("an unknown role was accepted")
    except ValueError as e:
        assert "admin" in str(e) and "editor" in str(e)
    assert [r.name for r in list_reviewers(store)] == ["ada", "bo"]  # nothing written for cy

    run = CliRunner().invoke(cli, ["reviewer", "add", "cy", "--role", "editor", "--store", str(store)])
    assert run.exit_code == 0 and "reviewer cy (editor): token sp_" in run.output, run.output
    listed = CliRunner().invoke(cli, ["reviewer", "list", "--store", str(store)])
    assert "editor" in listed.output and listed.output.count("reviewer") >= 2, listed.output
    bad = CliRunner().invoke(cli, ["reviewer", "add", "dee", "--role", "admin", "--store", str(store)])
    assert bad.exit_code != 0 and "unknown role" in bad.output


def test_a_store_made_before_roles_gets_the_column(tmp_path: Path) -> None:
    """An accounts file without ``roles``: read as no roles, and given the column on the
    next account added."""
    import sqlite3

    store = tmp_path / "store"
    store.mkdir()
    conn = sqlite3.connect(store / "reviewers.sqlite")
    conn.execute("CREATE TABLE reviewers (name TEXT PRIMARY KEY, token_sha256 TEXT NOT NULL UNIQUE,"
                 " created_at TEXT NOT NULL)")  # fmt: skip
    conn.execute("INSERT INTO reviewers VALUES ('old', 'x', '2026-01-01')")
    conn.commit()
    conn.close()
    assert reviewer_roles(store, "old") == () and list_reviewers(store)[0].roles == ()
    add_reviewer(store, "ada", [EDITOR])
    assert reviewer_roles(store, "ada") == (EDITOR,) and reviewer_roles(store, "old") == ()
