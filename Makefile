# cud — every entry point a person or CI uses. `make help` lists them.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
PREFIX ?= /usr/local
DESTDIR ?=

.PHONY: help setup lint test bench report-example console-example sandbox-up sandbox-down sandbox-status demo install clean

help:
	@echo "make setup          create $(VENV) and install cud with its test, anthropic, fleet and osworld extras (and desktop-env, the tests' reference)"
	@echo "make lint           ruff and mypy over the tree (tools/lint; tools/lint --fix applies ruff's fixes first)"
	@echo "make test           make lint, then the whole test suite (starts its own Xvfb/VNC servers)"
	@echo "make bench          measure cud against scrot, xdotool, Pillow and vncdotool"
	@echo "make report-example remake docs/report-example.png from a real run of the demo task"
	@echo "make console-example remake docs/console-example.png: the console during a pending approval"
	@echo "make sandbox-up     start Xvfb (or SANDBOX=xvnc), openbox, x11vnc, a demo app and cud (SEATS=N: N displays; CONFIG=my.toml SCENARIOS=dir/: docs/sandbox.md)"
	@echo "make demo           run the demo task in the sandbox (real model with OPENAI_API_KEY, else scripted)"
	@echo "make demo MODEL=claude  the demo task through Anthropic's Messages API (Claude with ANTHROPIC_API_KEY, else scripted)"
	@echo "make sandbox-status say what the sandbox runs"
	@echo "make sandbox-down   stop exactly what sandbox-up started"
	@echo "make install        install cud, its systemd units and config under PREFIX/DESTDIR (EXTRAS=fleet: with Ray)"

# desktop-env 1.0.2 is OSWorld's own metrics, the reference of the differential tests
# (tests/support/osworld_reference.py); --no-deps: its requirements (torch, easyocr, cloud SDKs) are not
# needed to load the metric modules, and the osworld-reference extra has what they import.
$(PY): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,anthropic,fleet,osworld,osworld-reference]'
	$(PY) -m pip install --quiet --no-deps desktop-env==1.0.2
	@touch $(PY)

setup: $(PY)

lint: $(PY)
	PYTHON=$(PY) tools/lint

# Lint first: CI runs `make test` (through the README's sandbox/quickstart.sh test), so a ruff or
# mypy finding fails CI before the suite spends its time.
test: lint
	$(PY) -m pytest

bench: $(PY)
	$(PY) -m bench

report-example: $(PY)
	$(PY) -m bench.report_example

console-example: $(PY)
	$(PY) -m bench.console_example

sandbox-up: $(PY)
	sandbox/up.sh

sandbox-down:
	sandbox/down.sh

sandbox-status:
	sandbox/status.sh

demo: sandbox-up
	sandbox/demo.sh

install:
	systemd/install.sh "$(DESTDIR)" "$(PREFIX)"

clean:
	rm -rf build dist *.egg-info .pytest_cache
