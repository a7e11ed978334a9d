# Two commands for a newcomer: `make demo` (the whole study on the OSHA corpus) and
# `make test` (install, then the test suite). Both create .venv on first use.
PY     ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CORPUS ?= ../shared/corpus
OUT    ?= out/osha6
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install test demo demo-intl lint clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# the CPU build of torch first (a local wheel here); otherwise pip pulls a multi-GB CUDA build
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dense,dev]'
	# Debian's Chromium for the browser tests (Playwright drives it; no browser download)
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium) \
		|| echo "chromium could not be installed: the browser test will be skipped"
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests

demo: $(STAMP)
	$(BIN)/sourcepage eval --corpus $(CORPUS) --questions benchmarks/osha6/questions.jsonl \
		--config benchmarks/osha6/experiment.yaml --out $(OUT)
	@echo "report: $(OUT)/report.md"

# The same design on the twenty-document, five-jurisdiction corpus with the intl20 benchmark
# (dev split by default; SPLIT=test once, at the end; SPLIT=questions for all 220).
INTL   ?= ../shared/corpus-intl
SPLIT  ?= dev
demo-intl: $(STAMP)
	$(BIN)/sourcepage eval --corpus $(INTL) --questions benchmarks/intl20/$(SPLIT).jsonl \
		--config benchmarks/intl20/experiment.yaml --out out/intl20-$(SPLIT)
	@echo "report: out/intl20-$(SPLIT)/report.md"

clean:
	rm -rf out .store
