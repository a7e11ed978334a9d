"""The label log: every label a person (or the system, for a referral) gives, in one
append-only SQLite table, ``<store>/labels.sqlite``.

It lives beside ``store.sqlite``, not in it: the web service opens the store read-only,
and a label must never change the store a ranking was made on. One row is one label:

- ``kind``: ``judgment`` (a graded page for a benchmark question), ``review`` (a
  reviewer's decision on a question the system referred), ``referral`` (a question the
  system decided ``review`` on) or ``ask`` (the same question asked again while its
  referral was open);
- ``subject``: what the label is about (a question id, a normalised question, a
  referral id), indexed with ``kind``;
- ``actor``: who gave it (a reviewer name, or ``system``);
- ``body``: the rest, as JSON (the database checks it is valid JSON and that a
  judgment's grade is 0, 1 or 2);
- ``created_at``: UTC with microseconds, :func:`stamp`.

Triggers refuse UPDATE and DELETE on any connection: a correction is a later row, and
the readers in :mod:`sourcepage.labels` decide which row is current. The meaning of each
kind is theirs; this module owns the SQL only.

Older stores kept judgments in ``judgments.sqlite`` and reviews in ``reviews.sqlite``
(each its own schema). Opening a log imports them once, in one transaction, keeping
their timestamps and order; the old files are left as they were.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ACTOR_SYSTEM", "DB_NAME", "KINDS", "Label", "LabelLog", "log_path", "normalise_question", "stamp"]

DB_NAME = "labels.sqlite"
KINDS: tuple[str, ...] = ("judgment", "review", "referral", "ask")
ACTOR_SYSTEM = "system"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS labels_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS labels (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  kind TEXT NOT NULL CHECK (kind IN ('judgment', 'review', 'referral', 'ask')),
  subject TEXT NOT NULL,
  actor TEXT NOT NULL CHECK (length(actor) > 0),
  body TEXT NOT NULL CHECK (json_valid(body)),
  created_at TEXT NOT NULL,
  CHECK (kind != 'judgment' OR json_extract(body, '$.grade') IN (0, 1, 2)));
CREATE INDEX IF NOT EXISTS labels_by_subject ON labels (kind, subject, id);
CREATE INDEX IF NOT EXISTS labels_by_kind ON labels (kind, id);
CREATE TRIGGER IF NOT EXISTS labels_no_update BEFORE UPDATE ON labels
  BEGIN SELECT RAISE(ABORT, 'the label log is append-only: record a new label instead'); END;
CREATE TRIGGER IF NOT EXISTS labels_no_delete BEFORE DELETE ON labels
  BEGIN SELECT RAISE(ABORT, 'the label log is append-only: record a new label instead'); END;
"""

#: the indexes the desk reads by (issue 51: every read scanned the whole log). Created and
#: filled for the rows already there in one transaction, then kept by triggers:
#: ``label_seq``: each row's number among its kind (the number people see);
#: ``referral_tags``: a referral's jurisdictions and topics ('jurisdiction:UK', 'topic:loto'),
#: by its number;
#: ``labels_review_referral``: the reviews that decide a referral, by its number;
#: ``label_decided``: the numbers of the referrals a review decided;
#: ``tag_counts``: referrals and decided ones by tag and by pair of tags ('a|b', sorted).
_INDEXES = """
BEGIN IMMEDIATE;
DROP TRIGGER IF EXISTS label_seq_on_insert;
DROP TRIGGER IF EXISTS label_tags_on_insert;
DROP TRIGGER IF EXISTS label_decided_on_insert;
DROP TRIGGER IF EXISTS label_index_on_insert;
DROP TABLE IF EXISTS label_tags;
CREATE TABLE IF NOT EXISTS label_seq (
  id INTEGER PRIMARY KEY, kind TEXT NOT NULL, seq INTEGER NOT NULL, UNIQUE (kind, seq));
CREATE TABLE IF NOT EXISTS referral_tags (tag TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (tag, seq))
  WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS referral_tags_by_seq ON referral_tags (seq, tag);
CREATE TABLE IF NOT EXISTS label_decided (seq INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS tag_counts (
  key TEXT PRIMARY KEY, total INTEGER NOT NULL, decided INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS labels_review_referral ON labels (json_extract(body, '$.referral'), id)
  WHERE kind = 'review';
CREATE TRIGGER IF NOT EXISTS label_index_on_insert AFTER INSERT ON labels BEGIN
  INSERT INTO label_seq (id, kind, seq) VALUES (NEW.id, NEW.kind,
    COALESCE((SELECT MAX(seq) FROM label_seq WHERE kind = NEW.kind), 0) + 1);
  INSERT OR IGNORE INTO referral_tags
    SELECT 'jurisdiction:' || value, (SELECT seq FROM label_seq WHERE id = NEW.id)
    FROM json_each(NEW.body, '$.jurisdictions') WHERE NEW.kind = 'referral';
  INSERT OR IGNORE INTO referral_tags
    SELECT 'topic:' || value, (SELECT seq FROM label_seq WHERE id = NEW.id)
    FROM json_each(NEW.body, '$.topics') WHERE NEW.kind = 'referral';
  INSERT INTO tag_counts (key, total, decided)
    SELECT key, 1, 0 FROM (
      SELECT tag AS key FROM referral_tags WHERE seq = (SELECT seq FROM label_seq WHERE id = NEW.id)
      UNION ALL SELECT a.tag || '|' || b.tag FROM referral_tags a
      JOIN referral_tags b ON b.seq = a.seq AND b.tag > a.tag
      WHERE a.seq = (SELECT seq FROM label_seq WHERE id = NEW.id))
    WHERE NEW.kind = 'referral' ON CONFLICT (key) DO UPDATE SET total = total + 1;
  UPDATE tag_counts SET decided = decided + 1
    WHERE NEW.kind = 'review' AND json_extract(NEW.body, '$.referral') IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM label_decided WHERE seq = json_extract(NEW.body, '$.referral'))
    AND key IN (
      SELECT tag AS key FROM referral_tags WHERE seq = json_extract(NEW.body, '$.referral')
      UNION ALL SELECT a.tag || '|' || b.tag FROM referral_tags a
      JOIN referral_tags b ON b.seq = a.seq AND b.tag > a.tag
      WHERE a.seq = json_extract(NEW.body, '$.referral'));
  INSERT OR IGNORE INTO label_decided SELECT json_extract(NEW.body, '$.referral')
    WHERE NEW.kind = 'review' AND json_extract(NEW.body, '$.referral') IS NOT NULL; END;
INSERT OR IGNORE INTO label_seq (id, kind, seq)
  SELECT id, kind, ROW_NUMBER() OVER (PARTITION BY kind ORDER BY id) FROM labels
  WHERE NOT EXISTS (SELECT 1 FROM labels_meta WHERE key = 'indexed:4');
INSERT OR IGNORE INTO referral_tags SELECT 'jurisdiction:' || j.value, s.seq
  FROM labels l JOIN label_seq s ON s.id = l.id, json_each(l.body, '$.jurisdictions') j
  WHERE l.kind = 'referral' AND NOT EXISTS (SELECT 1 FROM labels_meta WHERE key = 'indexed:4');
INSERT OR IGNORE INTO referral_tags SELECT 'topic:' || t.value, s.seq
  FROM labels l JOIN label_seq s ON s.id = l.id, json_each(l.body, '$.topics') t
  WHERE l.kind = 'referral' AND NOT EXISTS (SELECT 1 FROM labels_meta WHERE key = 'indexed:4');
INSERT OR IGNORE INTO label_decided SELECT json_extract(body, '$.referral') FROM labels
  WHERE kind = 'review' AND json_extract(body, '$.referral') IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM labels_meta WHERE key = 'indexed:4');
INSERT OR REPLACE INTO tag_counts (key, total, decided)
  SELECT k.key, COUNT(*), SUM(d.seq IS NOT NULL) FROM (
    SELECT seq, tag AS key FROM referral_tags UNION ALL SELECT a.seq, a.tag || '|' || b.tag
      FROM referral_tags a JOIN referral_tags b ON b.seq = a.seq AND b.tag > a.tag) k
  LEFT JOIN label_decided d ON d.seq = k.seq
  WHERE NOT EXISTS (SELECT 1 FROM labels_meta WHERE key = 'indexed:4') GROUP BY k.key;
INSERT OR IGNORE INTO labels_meta VALUES ('indexed:4', '1');
COMMIT;
"""
#: a label row with its number among its kind (``l``: labels, ``s``: label_seq)
_ROW = "l.id, l.kind, l.subject, l.actor, l.body, l.created_at, s.seq"
_FROM = "labels l JOIN label_seq s ON s.id = l.id"

#: the files of older stores, their table, and how a row becomes (kind, subject, actor, body)
_LEGACY = {
    "judgments": (
        "SELECT question_id, page, grade, reviewer, note, created_at FROM judgments ORDER BY id",
        lambda r: ("judgment", r[0], r[3], {"page": r[1], "grade": r[2], "note": r[4]}, r[5]),
    ),
    "reviews": (
        "SELECT question, method, text_version, system_decision, decision, pages, reviewer, note, topic,"
        " created_at FROM reviews ORDER BY id",
        lambda r: (
            "review",
            None,  # the reader's normalised question: filled by the importer's caller
            r[6],
            {
                "question": r[0],
                "method": r[1],
                "text_version": r[2],
                "system_decision": r[3],
                "decision": r[4],
                "pages": json.loads(r[5]),
                "note": r[7],
                "topic": r[8],
            },
            r[9],
        ),
    ),
}
_LEGACY_FILES = ("judgments.sqlite", "reviews.sqlite")


def stamp() -> str:
    """Now in UTC with microseconds (``2026-12-03T09:00:00.123456Z``): the one timestamp
    format of the log, so that rows written in the same second still sort."""
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"


def log_path(where: str | Path) -> Path:
    """The log of a store folder (``<store>/labels.sqlite``), or ``where`` itself when it
    names a file."""
    where = Path(where)
    return where / DB_NAME if where.is_dir() else where


@dataclass(frozen=True)
class Label:
    """One row of the log. ``id`` is the row's place in the whole log; ``seq`` its place
    among the labels of its kind (1, 2, …), the number people see ("review #3",
    "/questions/7"): the log is append-only, so neither ever changes."""

    id: int
    kind: str
    subject: str
    actor: str
    body: dict[str, Any]
    created_at: str
    seq: int


def normalise_question(question: str) -> str:
    """The key that makes two spellings of one question the same: case and spacing."""
    return " ".join(question.split()).lower()


class LabelLog:
    """An open label log. ``LabelLog(path)`` creates the file when needed (its folder
    must exist unless ``create_dirs``); ``readonly`` opens an existing one for reading
    only (sqlite3.OperationalError when there is none: see :meth:`reader`). Use it as a
    context manager or call close()."""

    def __init__(self, path: str | Path, *, create_dirs: bool = False, readonly: bool = False):
        self.path = log_path(path)
        self.readonly = readonly
        if readonly:  # a reader (a GET): never creates, migrates or imports, writes nothing
            uri = self.path.resolve().as_uri() + "?mode=ro"
            self.conn = sqlite3.connect(uri, uri=True, timeout=30, check_same_thread=False)
            return
        if create_dirs:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        elif not self.path.parent.is_dir():
            raise FileNotFoundError(f"no store folder at {self.path.parent}")
        self.conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
        try:
            self.conn.execute("PRAGMA journal_mode=WAL")
            # in WAL mode NORMAL loses no committed row when the process dies, only on power loss
            self.conn.execute("PRAGMA synchronous=NORMAL")
            with self.conn:
                self.conn.executescript(_SCHEMA)
            if not self._indexed():
                self.conn.executescript(_INDEXES)
            self._import_legacy()
        except BaseException:
            self.conn.close()
            raise

    @classmethod
    def reader(cls, store: str | Path) -> LabelLog | None:
        """The log of ``store`` opened read-only, or None when it has none yet (a read
        never creates it)."""
        path = log_path(store)
        if not path.is_file():
            return None
        log = cls(path, readonly=True)
        if not log._indexed():  # a log of an older version: indexed once, then read
            log.close()
            cls(path).close()
            log = cls(path, readonly=True)
        return log

    def _indexed(self) -> bool:
        try:
            return bool(self.conn.execute("SELECT 1 FROM labels_meta WHERE key = 'indexed:4'").fetchone())
        except sqlite3.OperationalError:  # no labels_meta: not a label log yet
            return False

    @classmethod
    def read(cls, store: str | Path) -> LabelLog:
        """The log of ``store`` for reading: opened read-only, or an empty log in memory
        when the store has none yet (what a GET reads: it never creates the file)."""
        found = cls.reader(store)
        if found is not None:
            return found
        if not log_path(store).parent.is_dir():
            raise FileNotFoundError(f"no store folder at {log_path(store).parent}")
        empty = cls.__new__(cls)
        empty.path, empty.readonly = Path(":memory:"), True
        empty.conn = sqlite3.connect(":memory:", check_same_thread=False)
        empty.conn.executescript(_SCHEMA)
        empty.conn.executescript(_INDEXES)
        return empty

    def __enter__(self) -> LabelLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    # ---------------------------------------------------------------- writing
    def append(
        self, kind: str, subject: str, actor: str, body: dict[str, Any], created_at: str | None = None
    ) -> Label:
        """Append one label in its own transaction; returns it with its id."""
        with self.transaction():
            return self.add(kind, subject, actor, body, created_at)

    @contextmanager
    def transaction(self) -> Iterator[LabelLog]:
        """Several appends as one transaction (``BEGIN IMMEDIATE``: a reader of the log
        inside it sees no other writer's rows appear)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self
        except BaseException:
            self.conn.rollback()
            raise
        self.conn.commit()

    def add(
        self, kind: str, subject: str, actor: str, body: dict[str, Any], created_at: str | None = None
    ) -> Label:
        """Append one label inside the caller's :meth:`transaction`."""
        if kind not in KINDS:
            raise ValueError(f"unknown label kind {kind!r}; one of {', '.join(KINDS)}")
        when = created_at or stamp()
        text = json.dumps(body, ensure_ascii=False, sort_keys=True)
        cur = self.conn.execute(
            "INSERT INTO labels (kind, subject, actor, body, created_at) VALUES (?, ?, ?, ?, ?)",
            (kind, subject, actor, text, when),
        )
        rid = int(cur.lastrowid or 0)
        (seq,) = self.conn.execute("SELECT seq FROM label_seq WHERE id = ?", (rid,)).fetchone()
        return Label(rid, kind, subject, actor, json.loads(text), when, int(seq))

    # ---------------------------------------------------------------- reading
    def labels(
        self,
        kind: str | None = None,
        subject: str | None = None,
        actor: str | None = None,
        after: int = 0,
        seqs: Iterable[int] | None = None,
        subjects: Iterable[str] | None = None,
    ) -> list[Label]:
        """Labels oldest first, optionally of one kind / subject (or any of ``subjects``) /
        actor, after an id, or with the given numbers among their kind (``seqs``)."""
        by_number = seqs is not None  # then kind goes to label_seq's (kind, seq) index, not labels'
        source = _FROM
        if kind is not None and not by_number and (subject is not None or subjects is not None):
            source = source.replace("labels l", "labels l INDEXED BY labels_by_subject", 1)  # not id order
        sql = f"SELECT {_ROW} FROM {source} WHERE l.id > ?"
        args: list[Any] = [after]
        for col, val in (("l.kind", None if by_number else kind), ("l.subject", subject), ("l.actor", actor)):
            if val is not None:
                sql += f" AND {col} = ?"
                args.append(val)
        if subjects is not None:
            among = sorted(set(subjects))
            sql += f" AND l.subject IN ({', '.join('?' * len(among))})"
            args += among
        if seqs is not None:
            wanted = sorted({int(n) for n in seqs})
            sql += f" AND s.seq IN ({', '.join('?' * len(wanted))})"
            args += wanted
            if kind is not None:
                sql += " AND s.kind = ?"
                args.append(kind)
        return self._labels(sql + " ORDER BY l.id", args)

    def _labels(self, sql: str, args: Iterable[Any]) -> list[Label]:
        rows = self.conn.execute(sql, list(args)).fetchall()
        return [Label(i, k, s, a, json.loads(b), c, q) for i, k, s, a, b, c, q in rows]

    # ---------------------------------------------------------------- the desk's reads
    def deciding(self, numbers: Iterable[int]) -> list[Label]:
        """The reviews that name one of these referral numbers, oldest first (indexed)."""
        wanted = sorted({int(n) for n in numbers})
        out: list[Label] = []
        for i in range(0, len(wanted), 500):
            part = wanted[i : i + 500]
            marks = ", ".join("?" * len(part))
            sql = (
                f"SELECT {_ROW} FROM labels l INDEXED BY labels_review_referral JOIN label_seq s"
                f" ON s.id = l.id WHERE l.kind = 'review' AND json_extract(l.body, '$.referral') IN ({marks})"
            )
            out += self._labels(sql, part)
        return sorted(out, key=lambda x: x.id)

    def _where(self, decided: bool | None, tags: list[str]) -> tuple[str, str, list[Any]]:
        """(FROM, WHERE, args) of referral numbers ``x.seq`` in order, driven by an index so
        that a page stops at its limit: the first tag's numbers ('jurisdiction:UK'), else
        every referral's; decided or not (None: both) by ``label_decided``."""
        if tags:
            source, where, args = "referral_tags x", "x.tag = ?", [tags[0]]
        else:
            source, where, args = "label_seq x", "x.kind = 'referral'", []
        for tag in tags[1:]:
            where += " AND EXISTS (SELECT 1 FROM referral_tags t WHERE t.tag = ? AND t.seq = x.seq)"
            args.append(tag)
        if decided is not None:
            no = "" if decided else "NOT "
            where += f" AND {no}EXISTS (SELECT 1 FROM label_decided d WHERE d.seq = x.seq)"
        return source, where, args

    def referral_page(
        self, decided: bool | None = None, tags: Iterable[str] = (), after: int = 0, limit: int = 50
    ) -> list[Label]:
        """Referrals numbered above ``after``, oldest first, at most ``limit``: decided or
        not (None: both), holding every tag ('jurisdiction:UK', 'topic:loto')."""
        tags = sorted(set(tags), key=self._tag_total)  # the rarer tag drives the scan
        source, where, args = self._where(decided, tags)
        sql = f"SELECT x.seq FROM {source} WHERE {where} AND x.seq > ? ORDER BY x.seq LIMIT ?"
        numbers = [n for (n,) in self.conn.execute(sql, [*args, after, limit])]
        return self.labels("referral", seqs=numbers) if numbers else []

    def _tag_total(self, tag: str) -> int:
        row = self.conn.execute("SELECT total FROM tag_counts WHERE key = ?", (tag,)).fetchone()
        return int(row[0]) if row else 0

    def referral_counts(self, tags: Iterable[str] = ()) -> dict[str, int]:
        """How many referrals (holding every tag) are pending and decided."""
        tags = list(tags)
        if not tags:  # two index counts, whatever the size of the log
            # numbers run 1, 2, … without a gap (the log is append-only): the last is the count
            (total,) = self.conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM label_seq WHERE kind = 'referral'"
            ).fetchone()
            (decided,) = self.conn.execute("SELECT COUNT(*) FROM label_decided").fetchone()
        elif len(tags) <= 2:  # kept by the triggers: one row
            row = self.conn.execute(
                "SELECT total, decided FROM tag_counts WHERE key = ?", ("|".join(sorted(set(tags))),)
            ).fetchone()
            total, decided = row or (0, 0)
        else:
            source, where, args = self._where(None, tags)
            (total,) = self.conn.execute(f"SELECT COUNT(*) FROM {source} WHERE {where}", args).fetchone()
            source, where, args = self._where(True, tags)
            (decided,) = self.conn.execute(f"SELECT COUNT(*) FROM {source} WHERE {where}", args).fetchone()
        return {"pending": int(total) - int(decided), "decided": int(decided)}

    def tags(self, prefix: str) -> list[str]:
        """The distinct tags starting with ``prefix`` (a skip scan of the tag index: one
        lookup per distinct value, not per referral)."""
        out: list[str] = []
        last = prefix
        while True:
            (tag,) = self.conn.execute(
                "SELECT MIN(tag) FROM referral_tags WHERE tag > ? AND tag < ?", (last, prefix + "\U0010ffff")
            ).fetchone()
            if tag is None or not tag.startswith(prefix):
                return out
            out.append(tag[len(prefix) :])
            last = tag

    # ---------------------------------------------------------------- older stores
    def _import_legacy(self) -> None:
        """Copy the rows of an older store's ``judgments.sqlite`` / ``reviews.sqlite`` (or
        of those tables in this very file) into the log, once."""
        sources = [self.path]
        if self.path.name == DB_NAME:
            sources += [self.path.parent / f for f in _LEGACY_FILES]
        for src in sources:
            if not src.exists():
                continue
            for table, (select, convert) in _LEGACY.items():
                key = f"imported:{src.name}:{table}"
                if self.conn.execute("SELECT 1 FROM labels_meta WHERE key = ?", (key,)).fetchone():
                    continue
                rows = self._legacy_rows(src, table, select)
                if rows is None:
                    continue
                with self.transaction():
                    if self.conn.execute("SELECT 1 FROM labels_meta WHERE key = ?", (key,)).fetchone():
                        continue  # another process imported it meanwhile
                    for r in rows:
                        kind, subject, actor, body, when = convert(r)
                        subject = subject if subject is not None else normalise_question(body["question"])
                        self.add(kind, subject, actor, body, when)
                    self.conn.execute("INSERT INTO labels_meta VALUES (?, ?)", (key, str(len(rows))))

    def _legacy_rows(self, src: Path, table: str, select: str) -> list[tuple] | None:
        conn = self.conn if src == self.path else sqlite3.connect(f"file:{src}?mode=ro", uri=True)
        try:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
            ).fetchone()
            return conn.execute(select).fetchall() if found else None
        finally:
            if conn is not self.conn:
                conn.close()
