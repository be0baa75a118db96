# Two commands do all the set-up on a fresh machine: `make run` and `make test`.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: run test test-boundary test-cpu lint typecheck unit simulator bench lock image image-args \
	clean

## The dependencies come from the lockfile (requirements/dev.txt: exact versions, each file's
## hash), the project itself after them with --no-deps: what CI tests is what the image ships
## (requirements/runtime.txt, the same pins). pyproject.toml keeps the ranges for library users.
## uv installs them, hash-checked as pip would, downloading and compiling in parallel (half
## pip's time); uv itself comes from requirements/uv.txt, hash-checked by the pip the venv is
## made with (not upgraded: the tests' `pip wheel` and `pip download` need no newer one). The
## project is built by requirements/build.txt's tools (the image's): nothing unpinned downloaded.
## Bytecode for every installed module, as pip did: test workers and the processes they start
## import the same modules at once, and PYTHONDONTWRITEBYTECODE may be set.
UV_INSTALL := $(VENV)/bin/uv pip install --quiet --python $(PY)
$(STAMP): pyproject.toml requirements/dev.txt requirements/build.txt requirements/uv.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --require-hashes -r requirements/uv.txt
	$(UV_INSTALL) --require-hashes --compile-bytecode -r requirements/dev.txt -r requirements/build.txt
	$(UV_INSTALL) --no-deps --no-build-isolation -e .
	@# The development tools (aireserve_sim, devslack) are no part of the product's wheel: this
	@# checkout on the dev venv's path brings them to `make run` and the tests.
	$(PY) -c "import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()['purelib'], \
		'cluster-bot-devtools.pth').write_text('$(CURDIR)\n')"
	touch $(STAMP)

## make run: with Slack credentials, the bot; without, the bot plus a local Slack stand-in.
run: $(STAMP)
	@$(COMPILE)  # bytecode even where PYTHONDONTWRITEBYTECODE is set
	$(PY) -m bot run

## make test: lint, type-check and every test that runs inside pytest's own processes (the
## in-process tier: Slack's protocol over loopback to FakeSlack and the simulator, on SQLite).
## make test-boundary: the rehearsals outside them (PostgreSQL, real bot and simulator processes,
## the image, a Debian root, releases from git history, Chromium). CI runs both (.ci/run);
## tests/conftest.py says which test is which.
test: lint typecheck unit

## lint: ruff, then the layering (pyproject.toml's import-linter contracts; docs/architecture.md).
lint: $(STAMP)
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports --no-logo

typecheck: $(STAMP)
	$(PY) -m mypy

## The suite runs on TEST_WORKERS pytest-xdist workers, tests spread one by one (--dist
## loadgroup), except the real-process ones, which run in two lanes of one test at a time, one
## worker each (`timed` tests that time what they see, `restarts` tests that kill and count:
## tests/conftest.py). Four workers on CI's 2 cores: in-process tests wait on threads (SQLite)
## and loopback between bursts of CPU, and the two lanes spend most of their time waiting on real
## seconds (bot and simulator processes, PostgreSQL), not computing. Bytecode first: every
## worker and every bot or simulator process a test starts imports bot/; and pytest keeps the
## test modules it rewrites for their asserts (each worker would rewrite all ~330 again, ~10 s of
## CPU each) even where PYTHONDONTWRITEBYTECODE is set.
TEST_WORKERS ?= 4
COMPILE := $(PY) -m compileall -q bot storage aireserve_sim devslack
PYTEST  := PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup
unit: $(STAMP)
	@$(COMPILE)
	$(PYTEST) -m "not boundary"

test-boundary: $(STAMP)
	@$(COMPILE)
	$(PYTEST) -m boundary

## make test-cpu: both tiers in one run, then where their CPU went, by kind of test and the
## costliest tests (tests/cpu_report.py; CPU_REPORT=rows.json keeps every test's figures).
test-cpu: $(STAMP)
	@$(COMPILE)
	$(PYTEST) -p tests.cpu_report

## make simulator: the AI Reserve simulator alone on 127.0.0.1:8787 with a virtual clock.
simulator: $(STAMP)
	$(PY) -m bot simulator --virtual-clock

## make bench: measure and report figures (Slack ack latency, poll sweep cost, outbox
## throughput); benchmarks, not tests — they never fail on a number.
bench: $(STAMP)
	$(PY) -m benchmarks

## make lock: compile the lockfiles again from pyproject.toml (after changing a range there, or
## to take newer releases: delete requirements/*.txt first). The runtime pins (the image's)
## constrain the dev ones, so both files agree on every package they share; build.txt pins what
## builds the image's wheel of the project (pyproject.toml's build-system); uv.txt pins the uv
## that installs the venv (UV_PIN: change it here, then make lock).
UV_PIN     := uv==0.13.9
UV_COMPILE := $(VENV)/bin/uv pip compile pyproject.toml --quiet --universal --python-version 3.11 \
	--generate-hashes --custom-compile-command 'make lock'
lock:
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet '$(UV_PIN)'
	$(UV_COMPILE) --extra postgres -o requirements/runtime.txt
	$(UV_COMPILE) --extra postgres --extra test -c requirements/runtime.txt -o requirements/dev.txt
	$(PY) -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['build-system']['requires'], sep='\n')" \
		| $(UV_COMPILE:pyproject.toml=-) -o requirements/build.txt
	echo '$(UV_PIN)' | $(UV_COMPILE:pyproject.toml=-) -o requirements/uv.txt

## make image: the container image, tagged cluster-bot:<version> and labelled with the version,
## the commit (bot/observability/build.py: `-dirty` when bot/, storage/ or pyproject.toml differ
## from it), the source and
## the build time: what `cluster-bot --version` and clusterbot_build_info say (CHANGELOG.md).
## ENGINE=podman (or buildah) builds it the same; `make -s image-args` prints the arguments
## (tests/image.py builds with them).
ENGINE  ?= docker
VERSION  = $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml)
REVISION = $(shell python3 bot/observability/build.py)
IMAGE_ARGS = --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) \
	--build-arg SOURCE=$(shell git remote get-url origin 2>/dev/null) \
	--build-arg CREATED=$(shell date -u +%Y-%m-%dT%H:%M:%SZ) --tag cluster-bot:$(VERSION) \
	$(if $(BASE),--build-arg BASE=$(BASE))
image:
	$(ENGINE) build $(IMAGE_ARGS) .

image-args:
	@echo $(IMAGE_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
