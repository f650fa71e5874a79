# gpu-guardian front door. `make demo` and `make test` do all set-up on a fresh Debian 12.
SHELL := /bin/bash
JOBS ?= $(shell nproc)
ARGS ?=
CTEST_ARGS ?=

# The operator binary `make run` starts and the port of the `kubectl proxy` it talks to.
BIN ?= build/bin
PROXY_PORT ?= 8001

.PHONY: all deps configure build shipped operator-bin test test-unit asan bench bench-scale demo run e2e fmt fuzz lint lint-all deploy docker clean

all: build

deps:
	@./scripts/bootstrap-deps.sh

configure: deps
	@[ -f build/build.ninja ] || cmake --preset dev >/dev/null

build: configure
	cmake --build build -j $(JOBS)

test: build
	ctest --test-dir build --output-on-failure -j $(JOBS) $(CTEST_ARGS)

test-unit: build
	ctest --test-dir build --output-on-failure -j $(JOBS) -L unit

asan: deps
	@[ -f build-asan/build.ninja ] || cmake --preset asan >/dev/null
	cmake --build build-asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir build-asan --output-on-failure -j $(JOBS) -L 'unit|sim'

bench: deps
	@[ -f build-release/build.ninja ] || cmake --preset release >/dev/null
	cmake --build build-release -j $(JOBS)
	./scripts/run-bench.sh build-release quick

bench-scale: deps
	@[ -f build-release/build.ninja ] || cmake --preset release >/dev/null
	cmake --build build-release -j $(JOBS)
	./scripts/run-bench.sh build-release scale

# Only what the demo runs: the simulator, operator, agent, kubectl plugin and the fake
# libnvidia-ml.so.1 (CMake target `shipped`) — no tests, no benchmarks.
shipped: configure
	cmake --build build -j $(JOBS) --target shipped

demo: shipped
	./scripts/demo.sh $(ARGS)

# The operator as a user first runs it: against `kubectl proxy --port=$(PROXY_PORT)`, default
# flags (no leader election: it acts at once). No image needed.
operator-bin: configure
	cmake --build build -j $(JOBS) --target gpu-guardian-operator

run: operator-bin
	$(BIN)/gpu-guardian-operator --server http://127.0.0.1:$(PROXY_PORT) $(ARGS)

# The user-path suite (test/shipped): with KUBECONFIG set, against that cluster (deploys
# deploy/ there; needs the images on the nodes, see `make docker`); without, against the
# simulator running deploy/ as real processes.
e2e: shipped
	python3 test/shipped/shipped_test.py --src . --bin $(BIN) $(if $(KUBECONFIG),--kubeconfig $(KUBECONFIG)) $(ARGS)

fmt: deps
	@git ls-files -co --exclude-standard -- 'src/*.h' 'src/*.cc' 'cmd/*.h' 'cmd/*.cc' 'test/*.h' \
	  'test/*.cc' 'bench/*.h' 'bench/*.cc' 'fuzz/*.h' 'fuzz/*.cc' | xargs -r clang-format-14 -i

# libFuzzer targets with clang (Debian's clang 14 works): only the fuzzers and what they link.
fuzz: deps
	@[ -f build-fuzz/build.ninja ] || cmake --preset fuzz >/dev/null
	cmake --build build-fuzz -j $(JOBS) --target fuzzers
	./scripts/run-fuzz.sh build-fuzz $${FUZZ_SECONDS:-30}

# clang-format 14 on every C++ file of the tree, and clang-tidy (.clang-tidy: naming + a few
# bug checks) on the C++ files changed since LINT_BASE (default: where this branch left main).
# CI runs `make lint`. `make lint-all`: clang-tidy on every file (slow on 2 cores; not in CI).
lint: deps
	./scripts/lint.sh $(LINT_BASE)

lint-all: deps
	LINT_TIDY_ALL=1 ./scripts/lint.sh

deploy:
	kubectl apply -k deploy/

docker:
	./scripts/docker-build.sh

clean:
	rm -rf build build-asan build-release build-fuzz
