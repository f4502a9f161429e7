VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: install test test-slow lint bench

install:
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0  # the CPU build; any other spec pulls CUDA wheels
	$(PY) -m pip install --quiet -e '.[dev]'

test:
	$(PY) -m pytest

test-slow:
	$(PY) -m pytest -m slow

lint:
	$(VENV)/bin/ruff check src tests benchmarks scripts

bench:
	$(PY) benchmarks/accounting.py
