# ahpd — see README.md. `make run` builds the web page and runs the daemon;
# `make test` runs every check CI runs.
GO      ?= go
WEBUI   := daemon/webui
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/ahp-dev/ahpd/daemon.Version=$(VERSION)

.PHONY: all build run web web-test test lint fuzz bench gen clean

all: build

build: web
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/ ./cmd/...

# Builds the web page (needs Node.js and npm) and runs the daemon with a
# terminal on your login shell; open the URL it prints.
run: build
	./bin/ahpd

web: $(WEBUI)/dist/index.html

$(WEBUI)/dist/index.html: $(WEBUI)/package.json $(WEBUI)/package-lock.json $(wildcard $(WEBUI)/src/*) $(WEBUI)/build.mjs
	cd $(WEBUI) && npm ci --no-audit --no-fund --loglevel=error && npm run build

web-test: web
	cd $(WEBUI) && npm test

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

fuzz:
	./scripts/fuzz-smoke.sh

test: lint web
	$(GO) test -race -count=1 ./...
	$(MAKE) fuzz
	$(MAKE) web-test

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./flow/ ./pty/ ./daemon/

clean:
	rm -rf bin $(WEBUI)/node_modules
	find $(WEBUI)/dist -mindepth 1 ! -name .gitkeep -delete
