"""Every child dies with its parent (issue 51): a hung ``tesseract`` outlived the
extraction worker killed at ``--max-seconds`` (re-parented to PID 1, alive 150 s later),
and after ``kill -9`` of ``ingest`` during OCR the forkserver, the worker and tesseract
lived on for 60-150 s. A fake ``tesseract`` on PATH that sleeps stands in for a hung one:
it records its PID, and the tests check it is gone within seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pdf_factory as pf
import pytest
import reliability_kit as K

HANG = "#!/bin/sh\necho $$ >> \"$FAKE_TESSERACT_PIDS\"\nexec sleep 300\n"


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def _gone(pids: list[int], seconds: float) -> list[int]:
    """The PIDs still alive after waiting up to ``seconds`` for them to end."""
    deadline = time.time() + seconds
    while any(_alive(p) for p in pids) and time.time() < deadline:
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


@pytest.fixture
def hung(tmp_path: Path):
    """(corpus of one scanned page, env with the hanging tesseract first on PATH, pid file)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "tesseract").write_text(HANG)
    (bin_dir / "tesseract").chmod(0o755)
    corpus = tmp_path / "corpus"
    pf.image_only_pdf(corpus / "pdf" / "scan.pdf")
    pf.write_manifest(corpus, [{"doc_id": "scan", "title": "A scanned page"}])
    pids = tmp_path / "tesseract.pids"
    env = {**K.env(), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_TESSERACT_PIDS": str(pids)}
    started: list[int] = []
    yield corpus, env, pids, started
    for pid in [*started, *_read(pids)]:  # never leave one behind, whatever failed
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _read(pids: Path) -> list[int]:
    return [int(x) for x in pids.read_text().split()] if pids.exists() else []


def _ingest(corpus: Path, store: Path, env: dict[str, str], *extra: str) -> subprocess.Popen:
    args = ["ingest", "--corpus", str(corpus), "--store", str(store), *extra]
    cmd = [sys.executable, "-m", "sourcepage.cli", *args]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_for(pids: Path, proc: subprocess.Popen, seconds: float) -> list[int]:
    deadline = time.time() + seconds
    while not _read(pids):
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        assert time.time() < deadline, "tesseract was never started"
        time.sleep(0.05)
    return _read(pids)


def test_a_hung_tesseract_dies_with_the_worker_stopped_at_max_seconds(hung, tmp_path: Path) -> None:
    corpus, env, pids, started = hung
    p = _ingest(corpus, tmp_path / "store", env, "--max-seconds", "3", "--workers", "1")
    started += [p.pid]
    try:
        tesseract = _wait_for(pids, p, 60)
        out, _ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert "time limit" in out, out[-2000:]
    assert _gone(tesseract, 3) == [], "tesseract outlived the worker stopped at --max-seconds"


def test_kill_9_of_ingest_during_ocr_leaves_no_process(hung, tmp_path: Path) -> None:
    corpus, env, pids, started = hung
    p = _ingest(corpus, tmp_path / "store", env, "--workers", "2")
    started += [p.pid]
    try:
        tesseract = _wait_for(pids, p, 60)
        kids = K.descendants(p.pid)
        started += kids
        assert set(tesseract) <= set(kids), (tesseract, kids)
        os.kill(p.pid, signal.SIGKILL)
    finally:
        p.wait(30)
    left = _gone(kids, 5)
    names = [Path(f"/proc/{k}/cmdline").read_bytes()[:80] for k in left]
    assert left == [], f"outlived the killed ingest: {names}"
