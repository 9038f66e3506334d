# One command to run the study, one to pass every test. Both set up what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint system-packages demo bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

PORT ?= 5000
WORKERS ?= 1

run: $(STAMP)
	$(BIN)/study serve --port $(PORT) --workers $(WORKERS)

demo: $(STAMP)
	$(BIN)/study serve protocols/demo.toml --port $(PORT) --workers $(WORKERS)

# Debian packages the tests drive for real: Chromium (browser tests), Redis (message queue),
# HAProxy (the balancer in front of several server processes, and HTTPS), OpenSSL (the
# HTTPS test's self-signed certificate).
SYSTEM_PACKAGES := chromium redis-server haproxy openssl
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

system-packages:
	@command -v chromium >/dev/null 2>&1 && command -v redis-server >/dev/null 2>&1 && \
	  command -v openssl >/dev/null 2>&1 && \
	  { command -v haproxy >/dev/null 2>&1 || test -x /usr/sbin/haproxy; } || { \
	  echo "installing $(SYSTEM_PACKAGES) from Debian's packages"; \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SYSTEM_PACKAGES); }

lint: $(STAMP)
	$(BIN)/ruff check .

# Two runs side by side, each in parallel (pytest-xdist), each handing its tests out one at
# a time from the longest (their ``minutes`` mark, tests/conftest.py), so the tests that
# wait on servers and clocks start first and the short ones fill the cores meanwhile: the
# tests that drive Chromium at a person's pace, mostly waiting on the round clock, and every
# other test, at a lower CPU priority (nice) so a busy machine never makes a person's round
# clock outrun the person. The browser run's output follows the other's; the exit code
# fails if either failed.
BROWSER_PROCESSES ?= 6
TEST_PROCESSES ?= 4
BROWSER_LOG := var/browser-tests.log

test: $(STAMP) system-packages lint
	@mkdir -p var
	@$(BIN)/pytest -m browser -n $(BROWSER_PROCESSES) --dist load --maxschedchunk 1 > $(BROWSER_LOG) 2>&1 & \
	browser=$$!; \
	nice -n 10 $(BIN)/pytest -m "not browser" -n $(TEST_PROCESSES) --dist load --maxschedchunk 1; \
	others=$$?; wait $$browser; browsers=$$?; \
	echo; echo "=== the browser tests (at a person's pace, beside the others) ==="; \
	cat $(BROWSER_LOG); \
	test $$others = 0 && test $$browsers = 0

# Every benchmark at a quick size, one after the other (benchmarks/run.py; about 16 minutes).
bench: $(STAMP)
	$(BIN)/python -m benchmarks.run

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache var
