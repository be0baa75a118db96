# Two commands do all the set-up on a fresh machine: `make run` and `make test`.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: run test lint typecheck unit simulator bench clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,postgres]'
	touch $(STAMP)

## make run: with Slack credentials, the bot; without, the bot plus a local Slack stand-in.
run: $(STAMP)
	@$(PY) -m compileall -q bot storage aireserve_sim devslack  # bytecode even where PYTHONDONTWRITEBYTECODE is set
	$(PY) -m bot run

## make test: lint, type-check and the whole suite (what CI runs).
test: lint typecheck unit

lint: $(STAMP)
	$(PY) -m ruff check .

typecheck: $(STAMP)
	$(PY) -m mypy

## The suite runs on TEST_WORKERS pytest-xdist workers, tests spread one by one (--dist
## loadgroup), except the real-process ones, which time what they see and so run one at a time
## on one worker (the `procs` group, tests/conftest.py). One worker more than CI's 2 cores: a
## serial run spends half its time waiting (on bot and simulator processes, PostgreSQL, real
## seconds), not computing. Bytecode first: every worker and every bot or simulator process a
## test starts imports bot/ (PYTHONDONTWRITEBYTECODE may be set).
TEST_WORKERS ?= 3
unit: $(STAMP)
	@$(PY) -m compileall -q bot storage aireserve_sim devslack
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup

## make simulator: the AI Reserve simulator alone on 127.0.0.1:8787 with a virtual clock.
simulator: $(STAMP)
	$(PY) -m bot simulator --virtual-clock

## make bench: measure and report figures (Slack ack latency, poll sweep cost, outbox
## throughput); benchmarks, not tests — they never fail on a number.
bench: $(STAMP)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
