# The two commands: `make run` and `make test`. Both install what is missing first.
SHELL := /bin/bash
.DEFAULT_GOAL := run
.PHONY: run test build bootstrap bench

bootstrap:
	@scripts/bootstrap.sh

# Installs what is missing too (scripts/bootstrap.sh), beside the server's compile.
build:
	@scripts/build.sh

## Build (release) and serve http://127.0.0.1:3000 on ./data/toolshed.db, with demo data.
run: build
	@. scripts/env.sh && target/toolshed serve

## Every test: unit, integration on SQLite and a throwaway PostgreSQL, browser tests.
test: build
	@scripts/test.sh

## Benchmarks (see BENCHMARKS.md).
bench: build
	@scripts/bench.sh
