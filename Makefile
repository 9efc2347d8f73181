# Two commands do everything on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DATA_DIR ?= data
PORT ?= 6650
ADMIN_PORT ?= 8080
# `make run` uses a virtualenv of its own with only what running the broker needs
RUN_VENV := .venv-run
CHROMIUM ?= /usr/bin/chromium
CHROMEDRIVER ?= /usr/bin/chromedriver

# The repository's virtualenv holds the dev extra (the suite, lint, type check, Spark, make dist).
.PHONY: codecs dist dist-check run test lint typecheck unit core-tests side-tests compat-tests compat compat-all proto bench bench-peers bench-capacity bench-java bench-failure bench-growth bench-sitting bench-go bench-go-perf clean debs browser fuse \
	pulsar pulsar-stop pulsar-fetch conformance conformance-java conformance-go

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip 'setuptools>=77,<90'

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

# The compiled codecs (setup.py) rebuilt in place whenever their C sources change.
CODECS := $(wildcard src/letterbox/protocol/*.[ch])
CODECS_STAMP := $(VENV)/.codecs
$(CODECS_STAMP): $(STAMP) setup.py $(CODECS)
	$(BIN)/python setup.py -q build_ext --inplace
	touch $@

codecs: $(CODECS_STAMP)

# `make run`: the package and its runtime dependencies only (no extras), reinstalled when a source
# file changes; PORT=0 / ADMIN_PORT=0 pick free ports.
SOURCES := $(shell find src/letterbox -name '*.py' -o -name '*.[ch]' -o -name '*.proto' -o -path '*/static/*' -type f) setup.py
$(RUN_VENV)/.installed: pyproject.toml $(SOURCES)
	test -x $(RUN_VENV)/bin/python || $(PYTHON) -m venv $(RUN_VENV)
	$(RUN_VENV)/bin/pip install -q --upgrade pip
	$(RUN_VENV)/bin/pip install -q .
	touch $@

run: $(RUN_VENV)/.installed
	$(RUN_VENV)/bin/letterbox standalone --data-dir $(DATA_DIR) --port $(PORT) --admin-port $(ADMIN_PORT)

# An sdist and a wheel in dist/ (the wheel compiles the codecs when a C compiler and the Python
# headers are there; without them it carries the pure-Python references), checked by twine.
dist: $(STAMP)
	rm -rf dist build/lib* build/temp* build/bdist*  # no stale build files in the wheel (build/conformance stays)
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*

# The wheel in a fresh virtualenv without extras: standalone, the README example, the console, and
# the installed size (tests/wheel_check.py). Needs the network for the dependencies.
DIST_CHECK_VENV ?= /tmp/letterbox-dist-check
dist-check: dist
	rm -rf $(DIST_CHECK_VENV)
	$(PYTHON) -m venv $(DIST_CHECK_VENV)
	$(DIST_CHECK_VENV)/bin/pip install -q dist/letterbox_broker-*.whl
	cd /tmp && $(DIST_CHECK_VENV)/bin/python $(abspath tests/wheel_check.py)

lint: $(CODECS_STAMP)
	$(BIN)/ruff check src tests benchmarks conformance

typecheck: $(CODECS_STAMP)
	$(BIN)/mypy

unit: $(CODECS_STAMP) browser fuse
	$(BIN)/pytest -q --ignore=tests/conformance

# The whole of tests/client and tests/spark a second time against brokers started
# --pulsar-compatible-only (letterbox extensions off, as Apache Pulsar): the client layer's fallback
# must pass them too. Tests marked letterbox_extension(reason) need an extension: they are
# deselected there and listed with their reason at the end of the run (docs/testing.md).
COMPAT_TESTS := tests/client tests/spark
compat: $(CODECS_STAMP)
	$(BIN)/pytest -q --pulsar-compatible-only $(COMPAT_TESTS)

compat-all: compat

# Debian packages some tests need, installed here when missing (root, or sudo without a
# password) in ONE apt-get run: make test builds its three suites at once, and two apt-gets at
# once fail on dpkg's lock. The console's browser tests (tests/console) drive chromium with its
# chromedriver; tests/storage/test_power_loss.py mounts a FUSE file system (fuse3: fusermount3,
# libfuse3). When the install is impossible the console tests skip and say why, and
# test_power_loss fails.
debs:
	@missing=""; \
	  { [ -x $(CHROMIUM) ] && [ -x $(CHROMEDRIVER) ]; } || missing=" chromium chromium-driver"; \
	  command -v fusermount3 >/dev/null || missing="$$missing fuse3"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; else SUDO=none; fi; \
	  if [ "$$SUDO" != none ] && command -v apt-get >/dev/null; then \
	    echo "installing$$missing for tests/console and tests/storage/test_power_loss.py"; \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null \
	      || echo "could not install$$missing: tests/console skips, test_power_loss fails"; \
	  else echo "missing:$$missing, and apt-get as root unavailable: tests/console skips, test_power_loss fails"; fi; \
	fi

browser fuse: debs

# make test runs the suite as three pytest processes at once: most tests wait on brokers, Spark
# JVMs and the browser rather than on the CPU (a serial run took 21 min of wall time for 6 min
# of CPU). core-tests is everything but the client layer, Spark and the console; side-tests is
# the client layer, Spark and the console; compat-tests is the compat rerun above (the whole of
# tests/client and tests/spark): split so the three take about as long (docs/testing.md).
# -O keeps each one's output together.
SIDE_TESTS := tests/client tests/spark tests/console tests/docs/test_spark_doc.py
test: lint typecheck
	$(MAKE) --no-print-directory -O -j3 core-tests side-tests compat-tests

core-tests: $(CODECS_STAMP) fuse
	$(BIN)/pytest -q -p no:cacheprovider $(addprefix --ignore=,$(SIDE_TESTS) tests/conformance)

side-tests: $(CODECS_STAMP) browser
	$(BIN)/pytest -q -p no:cacheprovider $(SIDE_TESTS)

compat-tests: $(CODECS_STAMP)
	$(BIN)/pytest -q -p no:cacheprovider --pulsar-compatible-only $(COMPAT_TESTS)

# Apache Pulsar itself beside letterbox (conformance/README.md). The reference broker's jars come
# from Maven Central into ~/.cache/letterbox/pulsar-<version> (conformance/pulsar/pom.xml pins it);
# `make pulsar` starts it on free ports, prints its URLs and leaves it running until `make pulsar-stop`.
pulsar-fetch: $(STAMP)
	$(BIN)/python -m conformance.reference fetch

pulsar: $(STAMP)
	$(BIN)/python -m conformance.reference start

pulsar-stop: $(STAMP)
	$(BIN)/python -m conformance.reference stop

# The scenario programs of the Java and Go clients (their own build files; outputs are git-ignored).
MVN := mvn -q -B -s conformance/pulsar/settings.xml
conformance-java:
	$(MVN) -f conformance/java/pom.xml package -DskipTests

conformance-go:
	cd conformance/go && go build -o ../../build/conformance/letterbox-conformance-go .

# Every differential scenario (Python, Java, Go, pulsar-admin, pulsar-client) against Apache Pulsar
# and letterbox, then the results table docs/conformance-results.md.
conformance: $(CODECS_STAMP) pulsar-fetch conformance-java conformance-go
	$(BIN)/pytest -q -p no:cacheprovider tests/conformance; status=$$?; \
	  $(BIN)/python -m conformance.table; exit $$status

# Regenerate the protobuf module from our schema (needs the dev extras).
proto:
	$(BIN)/pip install -q -e '.[proto]'
	cd src && PATH=$(abspath $(BIN)):$$PATH ../$(BIN)/python -m grpc_tools.protoc -I. --python_out=. --mypy_out=. letterbox/protocol/pulsar_api.proto

# letterbox side by side with NATS JetStream (installs nats-server with apt-get as root, and nats-py)
bench-peers: $(CODECS_STAMP)
	$(BIN)/python benchmarks/peers.py

# letterbox beside Apache Pulsar under pulsar-perf (fetches the reference broker's jars)
bench-capacity: $(CODECS_STAMP) pulsar-fetch
	$(BIN)/python benchmarks/capacity.py

# The failure path's throughput (redeliveries, dead-letter moves, redrive) beside Apache Pulsar,
# driven by a Java program on the official Java client (benchmarks/java; its jar is git-ignored)
bench-java:
	$(MVN) -f benchmarks/java/pom.xml package -DskipTests

bench-failure: $(CODECS_STAMP) pulsar-fetch bench-java
	$(BIN)/python benchmarks/failure_throughput.py

# the official Go client's perf tool (benchmarks/goperf pins the client version), and capacity
# measured with it as a second opinion beside pulsar-perf (benchmarks/capacity_go.py)
bench-go:
	cd benchmarks/goperf && GOFLAGS=-mod=mod go build -o ../../build/pulsar-perf-go github.com/apache/pulsar-client-go/perf

bench-go-perf: $(CODECS_STAMP) pulsar-fetch bench-go
	$(BIN)/python benchmarks/capacity_go.py

# peers, capacity and failure one after another, checked against the performance targets
# (benchmarks/sitting.py; each step's JSON into build/sitting)
bench-sitting: $(CODECS_STAMP) pulsar-fetch bench-java
	$(BIN)/python benchmarks/sitting.py

# letterbox beside Apache Pulsar as the work grows (topics, fan-out, backlog, message size, delayed
# messages): every point into build/growth.json, a chart per curve into docs/images. GROWTH_ARGS
# passes options (e.g. GROWTH_ARGS='--curves topics --topics 1,10,100,1000,10000').
GROWTH_ARGS ?=
bench-growth: $(CODECS_STAMP) pulsar-fetch
	mkdir -p build
	$(BIN)/python benchmarks/growth.py --json-out build/growth.json --charts docs/images $(GROWTH_ARGS)

clean:
	rm -rf $(VENV) $(RUN_VENV) build dist *.egg-info src/*.egg-info src/letterbox/protocol/*.so
