"""OCR of scanned pages: Debian's ``tesseract`` (Apache-2.0) over a PDFium rendering.

A page is OCR'd when it holds at least one image object and almost no text (fewer than
``OCR_MAX_CHARS`` non-space characters): the text layer of such a page is at most a
running header, so what a person reads there is in the image. OCR runs inside the
extraction job, i.e. in a ``LimitedPool`` worker under the ingest limits (the
``tesseract`` child inherits the worker's address-space limit and dies with it: the
kernel SIGKILLs it when the worker ends, also when the worker is killed at its time limit,
``executor.child_dies_with_parent``); each page has its own time limit too.

``tesseract`` is an external program, not a Python package: when it is absent the page
keeps its (near-empty) text layer and ``ocr_pages`` returns a notice saying so, so a
corpus still ingests. Output is deterministic: one OpenMP thread, a fixed resolution.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pypdfium2 as pdfium

from sourcepage.executor import child_dies_with_parent

#: a page with images and fewer non-space characters than this is read by OCR
OCR_MAX_CHARS = 100
#: rendering resolution: 200 dpi read OSHA 3150's scanned appendix faster than 300 dpi
#: (3.2 s vs 9.8 s a page) and with a higher mean word confidence (89 vs 58)
OCR_DPI = 200
#: the largest image rendered for OCR (pixels); a larger page is rendered at a lower dpi
OCR_MAX_PIXELS = 25_000_000
#: seconds one page may take in tesseract
OCR_PAGE_SECONDS = 120.0
#: words tesseract reads with a confidence below this are noise (speckle, rules, photos)
MIN_WORD_CONFIDENCE = 30.0


@dataclass(frozen=True)
class OcrPage:
    """The text tesseract read on one page and the mean confidence (0–100) of its words."""

    text: str
    confidence: float


def tesseract_path() -> str | None:
    """The ``tesseract`` program on PATH, or None when it is not installed."""
    return shutil.which("tesseract")


def needs_ocr(text: str, images: int) -> bool:
    """True for a page that looks scanned: images and almost no text."""
    return images > 0 and len("".join(text.split())) < OCR_MAX_CHARS


def _tsv_text(tsv: str) -> OcrPage:
    """Lines and paragraphs of tesseract's TSV output (level 5 rows are words), keeping
    words of at least ``MIN_WORD_CONFIDENCE``; the confidence is their mean."""
    lines: dict[tuple[int, int, int], list[str]] = {}
    confs: list[float] = []
    for row in tsv.splitlines()[1:]:
        f = row.split("\t")
        if len(f) != 12 or f[0] != "5" or not f[11].strip():
            continue
        conf = float(f[10])
        if conf < MIN_WORD_CONFIDENCE:
            continue
        confs.append(conf)
        lines.setdefault((int(f[2]), int(f[3]), int(f[4])), []).append(f[11].strip())
    out: list[str] = []
    last_par: tuple[int, int] | None = None
    for (block, par, _), words in lines.items():  # tesseract writes rows in reading order
        if last_par is not None and (block, par) != last_par:
            out.append("")
        out.append(" ".join(words))
        last_par = (block, par)
    mean = sum(confs) / len(confs) if confs else 0.0
    return OcrPage("\n".join(out), round(mean, 1))


def ocr_page(page: pdfium.PdfPage, tesseract: str) -> OcrPage:
    """Render ``page`` in grey at ``OCR_DPI`` and read it with ``tesseract`` (English,
    automatic page segmentation). Raises RuntimeError naming tesseract's complaint."""
    width, height = page.get_size()
    scale = OCR_DPI / 72
    pixels = width * height * scale * scale
    if pixels > OCR_MAX_PIXELS:
        scale *= (OCR_MAX_PIXELS / pixels) ** 0.5
    image = page.render(scale=scale, grayscale=True).to_pil()
    with tempfile.TemporaryDirectory(prefix="sourcepage-ocr-") as tmp:
        png = Path(tmp) / "page.png"
        image.save(png)
        env = {**os.environ, "OMP_THREAD_LIMIT": "1"}  # deterministic, and fair to the pool
        try:
            done = subprocess.run(
                [tesseract, str(png), "-", "-l", "eng", "--psm", "3", "tsv"],
                capture_output=True,
                text=True,
                env=env,
                timeout=OCR_PAGE_SECONDS,
                check=False,
                preexec_fn=child_dies_with_parent(),  # noqa: PLW1509 - only prctl runs in the child
            )
        except subprocess.TimeoutExpired as e:
            raise RuntimeError(f"tesseract took over {OCR_PAGE_SECONDS:g} s") from e
    if done.returncode != 0:
        raise RuntimeError(f"tesseract failed ({done.returncode}): {done.stderr.strip()[:200]}")
    return _tsv_text(done.stdout)


def merge_text_layer(layer: str, ocr: str) -> str:
    """The OCR text, led by the text-layer lines it did not read (a printed page number,
    a running header drawn as text over the scan), so nothing the PDF held is lost."""
    seen = " ".join(ocr.split()).lower()
    extra = [ln.strip() for ln in layer.splitlines() if ln.strip() and ln.strip().lower() not in seen]
    return "\n".join([*extra, ocr] if extra else [ocr])
