# Two commands do everything on a fresh machine:
#   make run    set up .venv (idempotent) and run the main job: normlab study (standard preset, all 16 claims)
#   make test   set up .venv with test deps (idempotent) and run the default test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
TORCH  := torch==2.13.0
# Where pip looks for torch. Empty: pip's own configuration (on Linux, PyPI's torch is a CUDA build of several
# GB). For the CPU-only build: make setup TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=

# The oldest transformers the `hf` extra allows (pyproject.toml), in an environment of its own with no torch: the
# tests load normlab's exported tokenizers there as well as under the newest (tests/hf/test_floor.py)
HF_FLOOR := 4.40.0
HF_FLOOR_VENV := .venv-hf-floor

.PHONY: run test test-slow setup browser hf-floor clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The stamp is rebuilt when pyproject.toml changes; torch is installed first, pinned, from TORCH_INDEX when
# given, so that normlab's own `torch>=2.4` is already met and pip installs no other build.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "$(TORCH)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/pip install --quiet -e ".[test]"
	touch $@

setup: $(VENV)/.installed

# the study, then every run its plateau stop ended continued to its budget (whether it would have trained is
# otherwise unknown: such runs are censored), then the study once more: a claim whose evidence was censored at its
# first look (C4's Post-LN at 16 layers) gets the seed round its continued runs show it needs, and those runs'
# stopped ones are continued in turn; then the report judged again with every outcome
run: setup
	$(BIN)/normlab study --preset standard --out normlab-study --no-report
	$(BIN)/python benchmarks/plateau_validation.py normlab-study
	$(BIN)/normlab study --preset standard --out normlab-study --no-report
	$(BIN)/python benchmarks/plateau_validation.py normlab-study
	$(BIN)/normlab report normlab-study

# The report's browser test drives Debian's Chromium; install it when missing (needs root, as in CI).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else echo "the browser test needs: sudo apt-get install chromium chromium-driver"; fi

$(HF_FLOOR_VENV)/.installed: Makefile
	$(PYTHON) -m venv $(HF_FLOOR_VENV)
	$(HF_FLOOR_VENV)/bin/pip install --quiet "transformers==$(HF_FLOOR)"
	touch $@

hf-floor: $(HF_FLOOR_VENV)/.installed

test: setup browser hf-floor
	$(BIN)/python -m pytest -q

test-slow: setup
	$(BIN)/python -m pytest -q -m slow

clean:
	rm -rf $(VENV) $(HF_FLOOR_VENV) runs
