# The bot's image: one process, `cluster-bot serve`, on the lockfile's exact packages.
#
#   make image     # docker build, tagged cluster-bot:<version> and labelled (Makefile's IMAGE_ARGS)
#   docker run --rm --env-file .env cluster-bot migrate        # the migrations, on their own
#   docker run --env-file .env -p 3000:3000 cluster-bot         # serve (SIGTERM: finish, exit)
#
# BASE: any Debian-like image with Python 3.11 and its venv module (the product's interpreter;
# both stages must use the same one: the venv copied into the final stage links to it).
# tests/test_image.py builds one from Debian packages, as registries can't be reached there.
ARG BASE=python:3.11-slim-bookworm

FROM ${BASE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# The tools that build the product's wheel (requirements/build.txt), then every dependency as
# the wheel whose hash the lockfile names (requirements/runtime.txt): binary wheels only, so
# nothing is compiled and no compiler is needed in either stage. The product's venv is made
# here without pip; the build venv's pip installs into it.
COPY requirements/build.txt requirements/runtime.txt requirements/
RUN python3 -m venv /opt/build \
    && /opt/build/bin/pip install --no-cache-dir --require-hashes --no-deps \
        -r requirements/build.txt \
    && /opt/build/bin/pip wheel --no-cache-dir --require-hashes --no-deps \
        --only-binary=:all: --wheel-dir /wheels -r requirements/runtime.txt \
    && python3 -m venv --without-pip /opt/cluster-bot \
    && /opt/build/bin/pip --python /opt/cluster-bot/bin/python install --no-cache-dir \
        --no-index --no-deps /wheels/*.whl \
    && rm -r /wheels
# The product: bot/ and storage/ (.dockerignore leaves out the tests, the simulator and the
# local Slack stand-in), built offline with the tools above. A layer of its own: a change to
# the code rebuilds only this one. The build says which release and commit it is (`make image`
# passes both): REVISION is written where the product reads its commit (there is no .git here;
# bot/observability/build.py), and VERSION must be the one the wheel has (pyproject.toml's), so
# the labels below can't name another.
ARG VERSION=""
ARG REVISION=unknown
COPY pyproject.toml setup.py README.md ./
COPY storage/ storage/
COPY bot/ bot/
RUN printf '%s\n' "${REVISION}" > bot/observability/REVISION \
    && /opt/build/bin/pip wheel --no-cache-dir --no-build-isolation --no-deps --no-index \
        --wheel-dir /src/dist . \
    && /opt/build/bin/pip --python /opt/cluster-bot/bin/python install --no-cache-dir \
        --no-index --no-deps /src/dist/*.whl \
    && built="$(/opt/cluster-bot/bin/python -c \
        'import importlib.metadata as m; print(m.version("cluster-bot"))')" \
    && if [ "${built}" != "${VERSION}" ]; then \
        echo "VERSION is '${VERSION}' but the wheel is ${built}: build with make image" >&2; \
        exit 1; fi

FROM ${BASE}
ENV PATH=/opt/cluster-bot/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
# The venv holds the product and its dependencies only: no pip, no build tools, no tests.
RUN useradd --no-log-init --uid 10001 --user-group --create-home \
        --home-dir /var/lib/cluster-bot --shell /usr/sbin/nologin cluster-bot
COPY --from=builder /opt/cluster-bot /opt/cluster-bot
USER 10001:10001
# A SQLite DATABASE_URL's relative path lands here (mount a volume); PostgreSQL for replicas.
WORKDIR /var/lib/cluster-bot
# PORT: Slack's requests; INTERNAL_PORT: /healthz, /readyz and /metrics (keep it private).
EXPOSE 3000 3001
# Liveness from inside the container, with the interpreter the image already has.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('INTERNAL_PORT', '3001'), timeout=4)"]
# `serve` stops taking work on SIGTERM and exits once what runs is done (bot/app/cli.py).
STOPSIGNAL SIGTERM
ENTRYPOINT ["cluster-bot"]
CMD ["serve"]
# What this image is (OCI annotations; `make image` passes them): the same version and commit
# that `cluster-bot --version` and `clusterbot_build_info` report, and the tag. Last: the build time
# changes every build, and no layer after it is rebuilt for it.
ARG VERSION=""
ARG REVISION=unknown
ARG SOURCE=""
ARG CREATED=""
LABEL org.opencontainers.image.title="cluster-bot" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.created="${CREATED}"
