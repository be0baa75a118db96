"""The development tools the product can use but doesn't ship.

The AI Reserve simulator (`aireserve_sim`) and the local Slack stand-in (`devslack`) are their own
top-level packages: a checkout and `make run` have them, the image leaves them out. Whatever
reaches for one asks here, so an install without them answers with one line and exit 2 instead
of a `ModuleNotFoundError`.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

SIMULATOR = "aireserve_sim"
LOCAL_SLACK = "devslack"


class DevToolMissing(Exception):
    """A development tool was asked for in an install that doesn't carry it."""

    def __init__(self, package: str, purpose: str, instead: str = "") -> None:
        super().__init__(f"{purpose} needs `{package}`, a development tool not installed here "
                         f"(a production install ships the bot only){instead}")


def available(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


def load(module: str, purpose: str, instead: str = "") -> ModuleType:
    """Import `module` (inside a development package), or say in one line why it can't be."""
    package = module.partition(".")[0]
    if not available(package):
        raise DevToolMissing(package, purpose, instead)
    return importlib.import_module(module)
