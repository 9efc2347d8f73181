# Two commands do everything on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DATA_DIR ?= data

.PHONY: run test lint typecheck unit proto bench bench-peers clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/letterbox standalone --data-dir $(DATA_DIR)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q

test: lint typecheck unit

# Regenerate the protobuf module from our schema (needs the dev extras).
proto:
	$(BIN)/pip install -q -e '.[dev]'
	cd src && PATH=$(abspath $(BIN)):$$PATH ../$(BIN)/python -m grpc_tools.protoc -I. --python_out=. --mypy_out=. letterbox/protocol/pulsar_api.proto

# letterbox side by side with NATS JetStream (installs nats-server with apt-get as root, and nats-py)
bench-peers: $(STAMP)
	$(BIN)/python benchmarks/peers.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
