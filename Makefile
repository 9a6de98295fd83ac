# ahpd — see README.md. `make run` builds the web page and runs the daemon;
# `make test` runs every check CI runs; `make test-stress` the Go suite under
# CPU contention.
GO      ?= go
WEBUI   := daemon/webui
CHROMIUM ?= /usr/bin/chromium
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/ahp-dev/ahpd/daemon.Version=$(VERSION) -X github.com/ahp-dev/ahpd/ctl.Version=$(VERSION)
# gRPC's request tracing (golang.org/x/net/trace) is built out: ahpd never
# turns it on, and it links html/template and expvar. Without it the
# binary is 5 MB smaller and the idle daemon's RSS 2.2 MB lower
# (docs/benchmarks-memory.md). Every go command below, tests included, and
# the binaries tests build, get the tag.
export GOFLAGS := -tags=grpcnotrace $(GOFLAGS)
# The binaries are built without cgo: nothing in ahpd needs it (it was
# linked only for net's and os/user's libc lookups; the Go resolver reads
# /etc/hosts, /etc/nsswitch.conf's files and dns, and DNS itself), and
# without libc the idle daemon's RSS is 1.3 MB lower
# (docs/benchmarks-memory.md). Tests keep cgo: -race needs it.
BUILD   := CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)'
# Pinned code generators, installed from the Go module proxy by `make gen`.
BUF_VERSION                := v1.75.0
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
GOBIN ?= $(shell $(GO) env GOPATH)/bin

.PHONY: all build run web web-test e2e bench-browser test test-stress lint fuzz bench bench-process bench-tcp bench-telemetry bench-attach bench-memory bench-upgrade bench-link gen proto-tools proto-check clean install

all: build

build: web
	$(BUILD) -o bin/ ./cmd/...

# Builds the web page (needs Node.js and npm) and runs the daemon with a
# terminal on your login shell and its own figures as a telemetry channel
# (--daemon-telemetry: ahp-telemetry:/ahpd, charts beside the terminal);
# open the URL it prints. ARGS passes flags on, e.g. make run
# ARGS='--listen 127.0.0.1:9000'.
run: build
	./bin/ahpd --daemon-telemetry $(ARGS)

web: $(WEBUI)/dist/index.html

$(WEBUI)/dist/index.html: $(WEBUI)/package.json $(WEBUI)/package-lock.json $(wildcard $(WEBUI)/src/*) $(WEBUI)/build.mjs
	cd $(WEBUI) && npm ci --no-audit --no-fund --loglevel=error && npm run build

web-test: web
	cd $(WEBUI) && npm test

# The real-browser test: bin/ahpd and headless Chromium (Debian's, never a
# downloaded one) via playwright-core. Screenshots and logs go to
# $(WEBUI)/e2e/artifacts/ (or $$ARTIFACTS_DIR).
e2e: build
	@test -x $(CHROMIUM) || { echo "make e2e: no browser at $(CHROMIUM) (apt-get install chromium)" >&2; exit 1; }
	cd $(WEBUI) && AHPD_BIN=$(CURDIR)/bin/ahpd CHROMIUM_BIN=$(CHROMIUM) npm run e2e

# The web page under a terminal flood in headless Chromium: `cat` of a
# 64 MiB file typed into the page, timed until its last line is on the
# screen, against the raw PTY read in the same run (bin/ahpbench -rawread,
# the raw reader of bench-process and bench-attach), per receive window
# (docs/benchmarks-browser.md). BENCHFLAGS passes flags on, e.g.
# BENCHFLAGS='--windows 256KiB,4MiB --rounds 5'; through emulated links
# (bin/linkemu, issue 40): BENCHFLAGS='--links none,0,20ms,80ms,200ms
# --windows default' (docs/benchmarks.md, "Real links"). Runs under
# flock /tmp/ahp-bench.lock so that benchmarks on a shared machine do not overlap.
bench-browser: build
	@test -x $(CHROMIUM) || { echo "make bench-browser: no browser at $(CHROMIUM) (apt-get install chromium)" >&2; exit 1; }
	$(GO) build -o bin/ ./bench/ahpbench ./bench/linkemu
	cd $(WEBUI) && AHPD_BIN=$(CURDIR)/bin/ahpd AHPBENCH_BIN=$(CURDIR)/bin/ahpbench LINKEMU_BIN=$(CURDIR)/bin/linkemu CHROMIUM_BIN=$(CHROMIUM) flock /tmp/ahp-bench.lock node e2e/bench-cat.mjs $(BENCHFLAGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

fuzz:
	./scripts/fuzz-smoke.sh

# Every step runs to its end even when an earlier one fails; then
# scripts/run-steps.sh prints which passed, failed or were skipped and how
# long each took, and exits non-zero if any failed. About 14 minutes on a
# 2-core machine (README.md, Quick start).
# Sub-makes are called as $(STEP_MAKE), not $(MAKE): make runs a recipe line
# that names $(MAKE) even under -n, and `make -n test` should print the steps.
STEP_MAKE = $(MAKE)
# The browser test: skipped (exit 77) without Chromium, but required in CI.
E2E_STEP = if [ -x $(CHROMIUM) ]; then $(STEP_MAKE) e2e; \
	elif [ "$$CI" = true ]; then \
	  echo "make test: FAIL: CI=true but $(CHROMIUM) is missing; the browser test must run in CI (.ci/run installs chromium)" >&2; exit 1; \
	else echo "make test: SKIPPED the browser test: no $(CHROMIUM) (apt-get install chromium, then make e2e)"; exit 77; fi

# -timeout 30m: under -race the ctl package's e2e tests (real daemons,
# upgrades, transfers) took 587 s on a loaded 2-core machine, close to go
# test's default of 10 minutes per package binary.
# Latency targets and wake-up bounds are checked without the race
# detector's slowdown too (the three non-race runs); the purego runs test
# the portable code beside the vector code (flow/scan_amd64.s,
# pty/scan_amd64.s, internal/b64).
test:
	@./scripts/run-steps.sh --title 'make test' \
	  lint              '$(STEP_MAKE) lint' \
	  web               '$(STEP_MAKE) web' \
	  race              '$(GO) test -race -count=1 -timeout 30m ./...' \
	  latency-daemon    "$(GO) test -count=1 -run 'TestCtrlCUnderFlood' ./daemon/" \
	  latency-pty       "$(GO) test -count=1 -run 'TestSmallWritesBatched|TestEchoWakesEmulatorAtOnce' ./pty/" \
	  latency-telemetry "$(GO) test -count=1 -run 'TestLossInvariants$$' ./telemetry/" \
	  purego            '$(GO) test -count=1 -tags purego ./flow/ ./internal/b64/' \
	  purego-pty        "$(GO) test -count=1 -tags purego -run 'TestPrintableEnd|TestIsASCII|TestFilter|TestEmulator' ./pty/" \
	  fuzz              '$(STEP_MAKE) fuzz' \
	  web-test          '$(STEP_MAKE) web-test' \
	  e2e               '$(E2E_STEP)'

# The Go suite under CPU contention: go test -race while two busy loops
# (started here, stopped after STRESS_LOAD_SECONDS at most, killed when the
# target ends, on failure and Ctrl-C too) compete for the CPUs, then
# STRESS_COUNT back-to-back runs of the suites with goroutines and timers,
# still under the busy loops. Prints the same summary as `make test`.
STRESS_COUNT        ?= 3
STRESS_PKGS         ?= ./flow/ ./pty/ ./telemetry/ ./tcp/ ./daemon/ ./daemon/session/
STRESS_LOAD_SECONDS ?= 3600
test-stress:
	@./scripts/run-steps.sh --title 'make test-stress' --load 2 --load-seconds $(STRESS_LOAD_SECONDS) \
	  race-under-load   '$(GO) test -race -count=1 -timeout 30m ./...' \
	  repeat            '$(GO) test -count=$(STRESS_COUNT) $(STRESS_PKGS)'

# BenchmarkViewers/close sets up 1,000 viewers outside the timer for each
# op, so it runs a fixed 20 ops (20,000 closes) instead of a second's
# worth of them, which took minutes.
bench:
	$(GO) test -run '^$$' -bench . -skip 'BenchmarkViewers/close' -benchmem ./flow/ ./pty/ ./daemon/
	$(GO) test -run '^$$' -bench 'BenchmarkViewers/close' -benchtime 20x -benchmem ./pty/

# The daemon as deployed: bin/ahpd in its own process, measured from this
# one against the raw PTY in the same run (throughput, CPU per MB, echo).
# BENCHFLAGS passes flags on, e.g. BENCHFLAGS='-runs 0 -gap 10ms'.
# Recording's cost (issue 42, docs/recording-bench.md): BENCHFLAGS='-runs 0
# -samples 0 -fanout 0 -memory=false -recordruns 15' runs the one-viewer cat
# without and with record = "output", alternating, and prints the CPU ratio.
bench-process:
	$(BUILD) -o bin/ ./cmd/ahpd
	$(GO) run ./bench/ahpbench -ahpd bin/ahpd $(BENCHFLAGS)

# TCP channels through bin/ahpd and `ahpctl forward`, against raw loopback
# TCP and a plain WebSocket relay in the same run (throughput, CPU per GiB,
# echo under a bulk neighbour). BENCHFLAGS passes flags on, e.g.
# BENCHFLAGS='-size 256MiB -runs 1'.
bench-tcp:
	$(BUILD) -o bin/ ./cmd/...
	$(GO) run ./bench/tcpbench -ahpd bin/ahpd -ahpctl bin/ahpctl $(BENCHFLAGS)

# Telemetry channels through bin/ahpd: push ingest with 0, 1 and 100
# viewers, and 100 viewers at 1,000 samples/s with and without
# permessage-deflate (samples/s, losses, daemon CPU, bytes per sample).
# BENCHFLAGS passes flags on, e.g. BENCHFLAGS='-duration 10s'.
bench-telemetry:
	$(BUILD) -o bin/ ./cmd/ahpd
	$(GO) run ./bench/telemetrybench -ahpd bin/ahpd $(BENCHFLAGS)

# `ahpctl attach` under a terminal flood: `cat` of a 64 MiB file typed into
# an ahpd terminal shown by bin/ahpctl attach in a tmux pane, timed until
# its last line is on the pane's screen, against the same cat in a tmux
# pane and the raw PTY read in the same run; snapshots, drops and the CPU
# of ahpd, ahpctl and tmux (docs/benchmarks-attach.md). Runs under flock
# /tmp/ahp-bench.lock so that benchmarks on a shared machine do not
# overlap. BENCHFLAGS passes flags on, e.g. BENCHFLAGS='-rounds 5
# -variants ";--window 1MiB"'.
bench-attach:
	$(BUILD) -o bin/ ./cmd/...
	flock /tmp/ahp-bench.lock $(GO) run ./bench/attachbench -ahpd bin/ahpd -ahpctl bin/ahpctl $(BENCHFLAGS)

# Memory of bin/ahpd idle with 1, 50 and 200 idle viewers (VmRSS, live
# heap, goroutines), each viewer on a WebSocket of its own with
# permessage-deflate (docs/benchmarks-memory.md). Runs under flock
# /tmp/ahp-bench.lock. BENCHFLAGS passes flags on, e.g.
# BENCHFLAGS='-viewers 1,1000 -flood 64'.
bench-memory:
	$(BUILD) -o bin/ ./cmd/ahpd
	flock /tmp/ahp-bench.lock $(GO) run ./bench/membench -ahpd bin/ahpd $(BENCHFLAGS)

# An upgrade in place of bin/ahpd under load: 100 terminals with a full
# 10,000-line scrollback and 500 viewers; time from the request until every
# viewer has its snapshot back, and RSS before and after
# (docs/upgrade.md). Runs under flock /tmp/ahp-bench.lock. BENCHFLAGS
# passes flags on, e.g. BENCHFLAGS='-terminals 20 -viewers 100 -rounds 5'.
bench-upgrade:
	$(BUILD) -o bin/ ./cmd/ahpd
	flock /tmp/ahp-bench.lock $(GO) run ./bench/upgradebench -ahpd bin/ahpd $(BENCHFLAGS)

# Issue 40's tables on emulated links (internal/linkemu at 100 Mbit/s each
# way, RTT 0, 20, 80 and 200 ms, the queue one bandwidth-delay product):
# `ahpctl forward` and chisel against a raw TCP copy through the same link,
# keystroke echo beside a bulk download on the same WebSocket, a cat to
# `ahpctl attach`, the daemon's memory (docs/benchmarks.md, "Real links").
# It builds ahpd and ahpctl of HEAD into a temp directory (BENCHFLAGS='-rev
# ""': the working tree; -ahpd/-ahpctl: given binaries) and measures under
# /tmp/ahp-bench.lock. CHISEL=/path/to/chisel adds chisel's columns (built
# under /tmp from github.com/jpillora/chisel, never committed). BENCHFLAGS
# passes flags on, e.g. BENCHFLAGS='-rtts 0,200ms -rounds 1'.
CHISEL ?=
bench-link:
	$(GO) run ./bench/linkbench -chisel '$(CHISEL)' $(BENCHFLAGS)

proto-tools:
	$(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	$(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

# Regenerates proto/ahp/v1/*.pb.go after buf lint.
gen: proto-tools
	cd proto && PATH="$(GOBIN):$$PATH" buf lint && PATH="$(GOBIN):$$PATH" buf generate

# CI: generated code is current, lint passes, and no breaking change since
# the previous commit (skipped until proto/ exists there).
proto-check: gen
	git diff --exit-code -- proto/
	if git cat-file -e HEAD~1:proto/buf.yaml 2>/dev/null; then cd proto && PATH="$(GOBIN):$$PATH" buf breaking --against '../.git#ref=HEAD~1,subdir=proto'; fi

# Installs bin/ahpd, bin/ahpctl, the systemd units and the example config
# (install.sh: PREFIX=/usr/local, DESTDIR for packagers). Run `make build`
# first as yourself; then `sudo make install`.
PREFIX ?= /usr/local
install:
	PREFIX='$(PREFIX)' DESTDIR='$(DESTDIR)' ./install.sh

clean:
	rm -rf bin $(WEBUI)/node_modules
	find $(WEBUI)/dist -mindepth 1 ! -name .gitkeep -delete
