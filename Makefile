# One command to run the study, one to pass every test. Both set up what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint browser demo bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/study serve

demo: $(STAMP)
	$(BIN)/study serve protocols/demo.toml

browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Chromium from Debian's packages"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
	  || (sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium); }

lint: $(STAMP)
	$(BIN)/ruff check .

test: $(STAMP) browser lint
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache var
