"""This build: its version, as `cluster-bot --version`, `db status` and the metrics'
`clusterbot_build_info` say it."""

from __future__ import annotations

import functools


@functools.cache
def version() -> str:
    """This build's version, as installed (pyproject.toml's `version`); read once (the
    package's metadata, parsed: ~40 ms)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("cluster-bot")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"
