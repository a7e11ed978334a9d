# Two commands for a newcomer: `make demo` (the whole study on the OSHA corpus) and
# `make test` (install, then the test suite). Both create .venv on first use.
PY     ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BROWSER := $(VENV)/.browser
OCR     := $(VENV)/.ocr
CORPUS ?= ../shared/corpus
OUT    ?= out/osha6
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install test test-all demo demo-intl demo-construction lint clean corpus

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# the CPU build of torch first (a local wheel here); otherwise pip pulls a multi-GB CUDA build
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dense,dev]'
	touch $(STAMP)

# Debian's Chromium for the browser tests only (Playwright drives it; no browser download)
$(BROWSER):
	@command -v chromium >/dev/null || { echo "installing Debian's chromium for the browser tests…"; \
		(apt-get update -qq && apt-get install -y -qq chromium >/dev/null) \
		|| echo "chromium could not be installed: the browser tests will be skipped"; }
	@touch $(BROWSER)

# Debian's tesseract reads scanned pages at ingest (corpus/ocr.py); without it a corpus
# still ingests and the scanned pages are named in a warning
$(OCR):
	@command -v tesseract >/dev/null || { echo "installing Debian's tesseract-ocr for scanned pages…"; \
		(apt-get update -qq && apt-get install -y -qq tesseract-ocr >/dev/null) \
		|| echo "tesseract could not be installed: scanned pages get no text, the OCR test is skipped"; }
	@touch $(OCR)

install: $(STAMP) $(OCR)

# two pytest workers (pytest-xdist), a test file each at a time: module fixtures stay whole
# and the suite takes about 5 minutes on 2 cores (2026-12-06); `heavy` tests (minutes of
# CPU each) only in test-all
test: $(STAMP) $(BROWSER) $(OCR)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m 'not heavy'

test-all: $(STAMP) $(BROWSER) $(OCR)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

lint: $(STAMP)
	$(BIN)/ruff check src tests

# checked before anything is installed: the demo needs the corpus folder
corpus:
	@test -f "$(CORPUS)/manifest.csv" || { \
		echo "make demo needs the OSHA corpus: $(CORPUS)/manifest.csv was not found."; \
		echo "Pass the folder that holds manifest.csv and pdf/: make demo CORPUS=/path/to/corpus"; \
		exit 2; }

demo: corpus $(STAMP)
	$(BIN)/sourcepage eval --corpus $(CORPUS) --questions benchmarks/osha6/questions.jsonl \
		--config benchmarks/osha6/experiment.yaml --out $(OUT)

# The same design on the twenty-document, five-jurisdiction corpus with the intl20 benchmark
# (dev split by default; SPLIT=test once, at the end; SPLIT=questions for all 220).
INTL   ?= ../shared/corpus-intl
SPLIT  ?= dev
demo-intl: $(STAMP)
	$(BIN)/sourcepage eval --corpus $(INTL) --questions benchmarks/intl20/$(SPLIT).jsonl \
		--config benchmarks/intl20/experiment.yaml --out out/intl20-$(SPLIT)

# The same design on the nineteen-document construction corpus with the construction benchmark
# (dev split by default; SPLIT=test once, at the end): report.md adds tables by project phase
# and by work package.
CONSTRUCTION ?= ../shared/corpus-construction
demo-construction: $(STAMP)
	@test -f "$(CONSTRUCTION)/manifest.csv" || { \
		echo "make demo-construction needs $(CONSTRUCTION)/manifest.csv (pass CONSTRUCTION=DIR)"; exit 2; }
	$(BIN)/sourcepage eval --corpus $(CONSTRUCTION) --questions benchmarks/construction/$(SPLIT).jsonl \
		--config benchmarks/construction/experiment.yaml --out out/construction-$(SPLIT)

clean:
	rm -rf out .store
