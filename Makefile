# Two commands do everything on a fresh machine:
#   make run    set up .venv (idempotent) and run the main job
#   make test   set up .venv with test deps (idempotent) and run the default test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
TORCH  := torch==2.13.0

.PHONY: run test test-slow setup clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The stamp is rebuilt when pyproject.toml changes; torch is pinned first so that
# pip never pulls a multi-GB CUDA build for the CPU machine.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "$(TORCH)"
	$(BIN)/pip install --quiet -e ".[test]"
	touch $@

setup: $(VENV)/.installed

run: setup
	$(BIN)/normlab train configs/nanogpt_cpu.toml --out runs/nanogpt_cpu

test: setup
	$(BIN)/python -m pytest -q

test-slow: setup
	$(BIN)/python -m pytest -q -m slow

clean:
	rm -rf $(VENV) runs
