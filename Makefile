# rlgpt: `make run` and `make test` work on a fresh clone; both set everything up first.
SHELL := /bin/bash
PYTHON_BIN ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMPS := .stamps
EXTRAS := env,learner,planner,critic,dev
PROTOS := $(wildcard proto/rlgpt/v1/*.proto)
TEST_TIMEOUT ?= 1800

.PHONY: setup proto run test test-e2e lint bench-env bench-learner bench-llm bench-rlgpt clean help

help:
	@echo "make run       - set up and run the main job on the embedded defaults"
	@echo "make test      - set up and run the test suite"
	@echo "make test-e2e  - slow end-to-end checks"
	@echo "make lint      - ruff"
	@echo "make bench-env - env server throughput benchmark -> docs/BENCHMARKS.md"
	@echo "make bench-learner - learner training FPS vs raw Crafter stepping -> docs/BENCHMARKS.md"
	@echo "make bench-llm - embedded LLMs on the agents' prompts -> docs/BENCHMARKS.md"
	@echo "make bench-rlgpt - pure RL vs pure code vs RL-GPT at one frame budget -> docs/BENCHMARKS.md"

setup: $(STAMPS)/install rlgpt/v1/env_pb2.py

$(VENV)/bin/python:
	$(PYTHON_BIN) -m venv $(VENV)

# torch first, from the CPU wheel on disk; constraints.txt keeps every later install from replacing it.
$(STAMPS)/torch: $(VENV)/bin/python
	$(PIP) install --quiet --disable-pip-version-check torch==2.13.0
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/install: $(STAMPS)/torch pyproject.toml constraints.txt
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
	timeout --signal=INT --kill-after=60 $(TEST_TIMEOUT) $(PY) -m pytest -q -p no:cacheprovider

test-e2e: setup
	timeout --signal=INT --kill-after=60 $(TEST_TIMEOUT) $(PY) -m pytest -q -p no:cacheprovider -m e2e

lint: setup
	$(VENV)/bin/ruff check rlgpt services tests benchmarks

bench-env: setup
	$(PY) -m benchmarks.bench_env --output docs/BENCHMARKS.md

bench-learner: setup
	$(PY) -m benchmarks.bench_learner --output docs/BENCHMARKS.md

bench-llm: setup
	$(PY) -m benchmarks.bench_llm --output docs/BENCHMARKS.md

bench-rlgpt: setup
	$(PY) -m benchmarks.bench_rlgpt --output docs/BENCHMARKS.md

clean:
	rm -rf $(VENV) $(STAMPS) rlgpt/v1/*_pb2*.py rlgpt/v1/*_pb2.pyi
