"""The development tools the product can use but doesn't ship — and the one place it reaches them.

The AI Reserve simulator (`aireserve_sim`) and the local Slack stand-in (`devslack`) are their own
top-level packages: a checkout and `make run` have them, the image leaves them out. No other
module of bot/ or storage/ imports either (an import-linter contract in pyproject.toml): whatever
needs one asks here, so an install without them answers with one line and exit 2 instead of a
`ModuleNotFoundError`. Each is imported only when it is used.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
from types import ModuleType
from typing import TYPE_CHECKING

from bot.clock import Clock

if TYPE_CHECKING:
    from aireserve_sim.config import SimConfig as SimConfig
    from aireserve_sim.embedded import EmbeddedSimulator as EmbeddedSimulator

SIMULATOR = "aireserve_sim"
LOCAL_SLACK = "devslack"


class DevToolMissing(Exception):
    """A development tool was asked for in an install that doesn't carry it."""

    def __init__(self, package: str, purpose: str, instead: str = "") -> None:
        super().__init__(f"{purpose} needs `{package}`, a development tool not installed here "
                         f"(a production install ships the bot only){instead}")


def available(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


def require(package: str, purpose: str, instead: str = "") -> None:
    """Raise `DevToolMissing` (saying what `purpose` needs, and `instead`) unless installed."""
    if not available(package):
        raise DevToolMissing(package, purpose, instead)


def load(module: str, purpose: str, instead: str = "") -> ModuleType:
    """Import `module` (inside a development package), or say in one line why it can't be."""
    require(module.partition(".")[0], purpose, instead)
    return importlib.import_module(module)


def embedded_simulator(config: SimConfig | None, clock: Clock, *, seed: int
                       ) -> EmbeddedSimulator:
    """The simulator on loopback inside this process (AIRESERVE_SIMULATOR=embedded, the local
    workspace), on `config` (None: the fast profile); an async context manager."""
    from aireserve_sim.config import SimConfig
    from aireserve_sim.embedded import EmbeddedSimulator

    return EmbeddedSimulator(config or SimConfig.fast(), clock, seed=seed)


def add_simulator_command(parser: argparse.ArgumentParser) -> bool:
    """Give `cluster-bot simulator` its options and command; False when not installed."""
    if not available(SIMULATOR):
        return False
    from aireserve_sim import standalone

    standalone.add_arguments(parser)
    parser.set_defaults(func=standalone.run)
    return True
