# One-command setup: `make app` runs the lab on the embedded default, `make test` runs the tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BFCL := bfcl-eval==2026.3.23

.PHONY: venv app test test-all test-browser test-install test-scale demo-model lint bench clean

$(STAMP): requirements-torch.txt requirements.txt requirements-dev.txt pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first and pinned: an unpinned torch (or one pulled in by trl) downloads a multi-GB CUDA build.
	$(BIN)/pip install -q -r requirements-torch.txt
	$(BIN)/pip install -q -r requirements.txt -r requirements-dev.txt
	# bfcl-eval without its dependencies: it pins a heavy stack (model SDKs, old numpy) that the
	# multi-turn API classes never import; they need only the standard library plus mpmath (above).
	$(BIN)/pip install -q --no-deps $(BFCL)
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

app: $(STAMP)
	$(BIN)/streamlit run app.py --server.address 127.0.0.1 --server.headless true

# The default suite (~6.5 min on 2 quiet cores; 8.5 min with the venv from scratch); `make test-all` adds the slow tests (a minute-long store soak,
# `rods bench curriculum`) and the browser tests (skipped without chromium and the demo model).
test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not browser"

# The demo's warm-started tiny model (models/tiny-demo, 8-10 min on 2 cores); `rods train` builds it too when missing.
demo-model: $(STAMP)
	$(BIN)/rods model demo --config configs/demo-cpu.yaml

# Drives the served app with headless chromium (Debian's: apt-get install -y chromium) against a real
# demo-cpu run on the warm-started model; not part of `make test`.
test-browser: demo-model
	$(BIN)/python -m pytest -q -m browser tests/test_browser.py

# The two-machine run (two accelerate launchers, machine ranks 0 and 1, on this host; 15 s quiet, ~65 s loaded);
# .ci/run runs it after `make test`.
test-scale: $(STAMP)
	$(BIN)/python -m pytest -q -m slow tests/test_scale.py

# `pip install .` in a fresh venv (torch first, bfcl-eval without its dependencies), then `rods --help`, a BFCL
# command and the training imports from outside the source tree; downloads the whole stack.
test-install:
	bash tests/install_check.sh $(PY) $(BFCL)

test-all: $(STAMP)
	$(BIN)/python -m pytest -q

# One ruff config (pyproject.toml) for the linter and the formatter; .ci/run runs this after `make test`.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: $(STAMP)
	$(BIN)/rods bench env

clean:
	rm -rf $(VENV) .pytest_cache
