"""`sourcepage export` / `verify`: the reproducibility package of a run round-trips, is
byte-identical when exported twice, and every kind of tampering is reported."""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import pytest
from test_experiment import QUESTIONS
from typer.testing import CliRunner

from sourcepage.cli import app
from sourcepage.evaluation.experiment import Design, run_experiment
from sourcepage.package.export import PackageError, export, verify
from sourcepage.store.db import Store


@pytest.fixture(scope="module")
def run_dir(safety_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pkg")
    questions = root / "questions.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    design = Design(blocks=[(["raw"], ["bm25", "rrf:bm25+lsa"]), (["cleaned"], ["bm25"])], bootstrap=200)
    run_experiment(safety_corpus, questions, root / "run", design=design)
    return root / "run"


@pytest.fixture(scope="module")
def package(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("zip") / "package.zip"
    export(run_dir, out)
    return out


def _rewrite(package: Path, target: Path, name: str, change, fix_checksum: bool) -> Path:
    """A copy of ``package`` with file ``name`` changed (and package.json updated if asked)."""
    with zipfile.ZipFile(package) as z:
        files = {n: z.read(n) for n in z.namelist()}
    files[name] = change(files[name])
    if fix_checksum:
        manifest = json.loads(files["package.json"])
        manifest["files"][name] = hashlib.sha256(files[name]).hexdigest()
        files["package.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(target, "w") as z:
        for n, data in files.items():
            z.writestr(n, data)
    return target


def _failed(checks) -> dict[str, list[str]]:
    return {c.name: c.details for c in checks if not c.ok}


def test_round_trip_with_corpus_and_rerank(package: Path, run_dir: Path, safety_corpus: Path) -> None:
    checks = verify(package, safety_corpus, rerank=True)
    assert _failed(checks) == {}
    assert [c.name.split(" ")[0] for c in checks] == [
        "checksums", "question", "trec/qrels.txt", "ranked.jsonl", "metrics.json", "stats.json",
        "corpus", "segments", "rankings",
    ]  # fmt: skip
    with zipfile.ZipFile(package) as z:
        names = set(z.namelist())
        seg = [json.loads(x) for x in z.read("segments/cleaned.jsonl").decode().splitlines()]
        settings = json.loads(z.read("settings.json"))
    for name in (
        "package.json", "run.json", "metrics.json", "stats.json", "ranked.jsonl", "questions.jsonl",
        "trec/qrels.txt", "trec/raw__bm25.run", "trec/raw__rrf-bm25_lsa.run", "segments/raw.jsonl",
        "segments/enriched.jsonl", "corpus/manifest.csv", "corpus/files.json", "environment.json",
    ):  # fmt: skip
        assert name in names, name
    st = Store(run_dir / "store")
    try:
        chunks = st.chunks("cleaned")
    finally:
        st.close()
    assert [r["chunk_id"] for r in seg] == [c.chunk_id for c in chunks]
    assert seg[0]["sha256"] == hashlib.sha256(chunks[0].text.encode()).hexdigest()
    assert seg[0]["spans"] == [list(s) for s in chunks[0].spans] and seg[0]["page"] == chunks[0].page
    assert settings["experiment"]["bm25"] == {"k1": 1.5, "b": 0.75, "variant": "robertson", "delta": 0.5}
    assert settings["text_settings"]["chunk"]["size"] == 1000


def test_export_is_byte_identical(package: Path, run_dir: Path, tmp_path: Path) -> None:
    export(run_dir, tmp_path / "again.zip")
    assert (tmp_path / "again.zip").read_bytes() == package.read_bytes()


def test_tampered_metrics_detected(package: Path, tmp_path: Path) -> None:
    def bump(data: bytes) -> bytes:
        m = json.loads(data)
        m["runs"][0]["mrr"] = round(m["runs"][0]["mrr"] - 0.1, 6)
        return json.dumps(m).encode()

    # without fixing package.json: the checksum says so, and the re-derived metric too
    failed = _failed(verify(_rewrite(package, tmp_path / "a.zip", "metrics.json", bump, False)))
    assert set(failed) == {
        "checksums of the packaged files",
        "metrics.json re-derived from the run files and the questions",
    }
    assert failed["checksums of the packaged files"] == ["metrics.json: SHA-256 differs from package.json"]
    assert any(
        ".mrr: package" in d for d in failed["metrics.json re-derived from the run files and the questions"]
    )
    # with package.json fixed: the recomputation still catches it
    failed = _failed(verify(_rewrite(package, tmp_path / "b.zip", "metrics.json", bump, True)))
    assert set(failed) == {"metrics.json re-derived from the run files and the questions"}


def test_tampered_run_file_detected(package: Path, tmp_path: Path) -> None:
    def swap(data: bytes) -> bytes:  # the first two pages of the first question change places
        lines = data.decode().splitlines(keepends=True)
        a, b = lines[0].split(), lines[1].split()
        a[2], b[2] = b[2], a[2]
        return (" ".join(a) + "\n" + " ".join(b) + "\n" + "".join(lines[2:])).encode()

    failed = _failed(verify(_rewrite(package, tmp_path / "c.zip", "trec/raw__bm25.run", swap, True)))
    assert "ranked.jsonl matches the run files" in failed
    assert failed["ranked.jsonl matches the run files"][0].startswith(
        "raw bm25 A1: ranked.jsonl and the run file"
    )


def test_tampered_segments_and_corpus_detected(package: Path, fresh_corpus: Path, tmp_path: Path) -> None:
    def forge(data: bytes) -> bytes:
        rows = [json.loads(x) for x in data.decode().splitlines()]
        rows[0]["sha256"] = "0" * 64
        return "".join(json.dumps(r) + "\n" for r in rows).encode()

    forged = _rewrite(package, tmp_path / "d.zip", "segments/raw.jsonl", forge, True)
    assert _failed(verify(forged)) == {}  # without the corpus the inventory cannot be checked
    failed = _failed(verify(forged, fresh_corpus))
    assert list(failed) == ["segments re-derived from the corpus (fresh ingest, recorded settings)"]
    assert failed[list(failed)[0]][0].endswith(": sha256 differ")
    pdf = fresh_corpus / "pdf" / "hse_ppe_at_work.pdf"
    pdf.write_bytes(pdf.read_bytes() + b"\n% changed\n")
    failed = _failed(verify(package, fresh_corpus))
    assert failed["corpus matches the packaged manifest and checksums"] == [
        f"{pdf}: SHA-256 differs from the package"
    ]


def test_export_refuses_a_changed_run(run_dir: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(run_dir, tmp_path / "run", symlinks=True))
    (copy / "metrics.json").write_text("{}")
    with pytest.raises(PackageError, match="metrics.json is missing or changed since the run"):
        export(copy, tmp_path / "x.zip")
    with pytest.raises(PackageError, match="run.json"):
        export(tmp_path, tmp_path / "y.zip")
    assert not (tmp_path / "x.zip").exists() and not (tmp_path / "y.zip").exists()


def test_cli_export_and_verify(run_dir: Path, safety_corpus: Path, package: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["export", str(run_dir), "--out", str(tmp_path / "p.zip")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["verify", str(tmp_path / "p.zip"), "--corpus", str(safety_corpus)])
    assert res.exit_code == 0 and "all 8 checks hold" in res.output, res.output
    bad = _rewrite(
        package, tmp_path / "bad.zip", "questions.jsonl", lambda d: d.replace(b"lockbox", b"lock box"), True
    )
    res = runner.invoke(app, ["verify", str(bad)])
    assert res.exit_code == 1 and "DIFF question set matches run.json" in res.output, res.output
    res = runner.invoke(app, ["verify", str(tmp_path / "nothing.zip")])
    assert res.exit_code == 2 and "not a readable zip" in res.output


# --------------------------------------------------------------------------- untrusted packages (issue 51)


def _plant(package: Path, target: Path, extra: dict[str, bytes], list_them: bool = True) -> Path:
    """A copy of a real package with ``extra`` entries added (and listed in package.json
    with their right SHA-256, so only the names are wrong)."""
    with zipfile.ZipFile(package) as z:
        files = {n: z.read(n) for n in z.namelist()}
    manifest = json.loads(files["package.json"])
    if list_them:
        manifest["files"].update({n: hashlib.sha256(b).hexdigest() for n, b in extra.items()})
    files["package.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(target, "w") as z:
        for n, data in [*files.items(), *extra.items()]:
            z.writestr(zipfile.ZipInfo(n), data)
    return target


@pytest.mark.parametrize(
    "name",
    [
        "../../../planted.txt",
        "trec/../../../../planted.txt",
        "ABS",
        "trec\\..\\..\\planted.txt",
        "C:planted.txt",
    ],
)
def test_verify_writes_nothing_outside_its_folder(
    package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Zip slip: an entry named with '..', an absolute path, backslashes or a drive letter is
    refused with its name, before anything is written, and nothing appears outside."""
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    monkeypatch.setattr("tempfile.tempdir", str(deep))
    name = str(tmp_path / "abs-planted.txt") if name == "ABS" else name
    bad = _plant(package, tmp_path / "bad.zip", {name: b"reviewers: approve everything\n"})
    with pytest.raises(PackageError, match="entry") as e:
        verify(bad)
    assert repr(name)[1:-1] in str(e.value) or name in str(e.value)
    planted = [p for p in tmp_path.rglob("*planted*")]
    assert planted == []
    assert list(deep.iterdir()) == []  # the temporary folder is gone too
    res = CliRunner().invoke(app, ["verify", str(bad)])
    assert res.exit_code != 0 and "hold" not in res.output and "Traceback" not in res.output
    assert [p for p in tmp_path.rglob("*planted*")] == []


def test_verify_refuses_duplicates_and_links(package: Path, tmp_path: Path) -> None:
    dup = _plant(package, tmp_path / "dup.zip", {"report.md": b"a second report.md\n"}, list_them=False)
    with pytest.raises(PackageError, match="'report.md': twice"):
        verify(dup)
    with zipfile.ZipFile(package) as z:
        files = {n: z.read(n) for n in z.namelist()}
    link = zipfile.ZipInfo("trec/elsewhere")
    link.external_attr = (0o120777) << 16  # a symbolic link to /etc
    with zipfile.ZipFile(tmp_path / "link.zip", "w") as z:
        for n, data in files.items():
            z.writestr(n, data)
        z.writestr(link, b"/etc")
    with pytest.raises(PackageError, match="'trec/elsewhere': a symbolic link"):
        verify(tmp_path / "link.zip")


@pytest.mark.parametrize(
    "manifest", [b"[]", b'{"files": []}', b'{"files": {"run.json": 3}}', b'"x"', b"\xff\xfe", b"{"]
)
def test_a_package_json_of_the_wrong_shape_is_a_clear_error(
    package: Path, tmp_path: Path, manifest: bytes
) -> None:
    with zipfile.ZipFile(package) as z:
        files = {n: z.read(n) for n in z.namelist()}
    files["package.json"] = manifest
    with zipfile.ZipFile(tmp_path / "shape.zip", "w") as z:
        for n, data in files.items():
            z.writestr(n, data)
    with pytest.raises(PackageError, match="package.json"):
        verify(tmp_path / "shape.zip")
    res = CliRunner().invoke(app, ["verify", str(tmp_path / "shape.zip")])
    assert res.exit_code != 0 and "package.json" in res.output


def test_a_run_json_of_the_wrong_shape_is_a_clear_error(package: Path, tmp_path: Path) -> None:
    bad = _rewrite(package, tmp_path / "run.zip", "run.json", lambda b: b"[1, 2]", fix_checksum=True)
    with pytest.raises(PackageError, match="wrong shape"):
        verify(bad)
