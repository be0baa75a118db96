"""The import directions of ARCHITECTURE.md, checked: data flows one way.

domain imports nothing of ours; services import domain, reserve and storage (never slack);
reserve and storage import domain at most; slack imports domain and services; jobs import
services; only runtime (and the entry points) import everything. bot.logs (the log context)
is, like bot.clock, a utility any layer above the domain may use.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent

ALLOWED = {
    "bot.domain": {"bot.domain"},
    "bot.services": {"bot.domain", "bot.services", "bot.reserve", "storage", "bot.clock",
                     "bot.logs"},
    "bot.reserve": {"bot.domain", "bot.reserve", "bot.clock"},
    "storage": {"bot.domain", "storage"},
    "bot.slack": {"bot.domain", "bot.services", "bot.slack", "bot.clock", "bot.logs"},
    "bot.jobs": {"bot.services", "bot.jobs"},
    # The development tools (their own top-level packages, left out of the image): the
    # simulator speaks the provider's schemas; the Slack stand-in knows nothing of the bot.
    "aireserve_sim": {"aireserve_sim", "bot.reserve.schemas", "bot.reserve.errors", "bot.clock"},
    "devslack": {"devslack", "bot.clock"},
}
# The notifier implements the domain's Notifier port: it renders stored state and keeps the
# coordinates of the messages it edits, so it reads storage; its outbox claims every post in
# the database (and nothing else of the slack package touches storage).
EXCEPTIONS = {"bot/slack/notifier.py": {"storage"}, "bot/slack/outbox.py": {"storage"},
              # the notifier's fallbacks for undeliverable targets, split out of it
              "bot/slack/unreachable.py": {"storage"},
              # the notifier's delivery of notices, split out of it (by lane)
              "bot/slack/notices.py": {"storage"},
              # storm digests and the degraded notice's duty edits, split out of it too
              "bot/slack/digests.py": {"storage"}, "bot/slack/duty.py": {"storage"},
              # the owner's DM questions (not serving, idle), split out of it
              "bot/slack/asks.py": {"storage"},
              # the local workspace is an entry point: the bot, the stand-in and a terminal
              "devslack/local.py": {"bot"}}
OURS = ("bot", "storage", "aireserve_sim", "devslack")
DEV_TOOLS = ("aireserve_sim", "devslack")


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return {name for name in found if name.split(".")[0] in OURS}


def package_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:2]) if parts[0] == "bot" else parts[0]


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_what_it_may(layer):
    base = ROOT.joinpath(*layer.split("."))
    offenders = []
    for path in base.rglob("*.py"):
        allowed = ALLOWED[layer] | EXCEPTIONS.get(str(path.relative_to(ROOT)), set())
        for name in imports_of(path):
            if not any(name == ok or name.startswith(ok + ".") for ok in allowed):
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offenders == []


def test_every_module_stays_readable():
    """ARCHITECTURE rule 1: look hard at anything over 400 lines (schemas and tables are one
    flat list each)."""
    flat = ("schemas.py", "tables.py")
    long = [f"{p.relative_to(ROOT)}: {n}" for base in OURS for p in ROOT.glob(f"{base}/**/*.py")
            if (n := len(p.read_text().splitlines())) > 420 and p.name not in flat]
    assert long == []


def test_the_product_needs_no_development_tool():
    """The image ships bot/ and storage/ alone: only the runtime's embedded simulator and the
    `run`/`simulator` commands reach for a development tool, lazily, through bot.devtools."""
    reaching = {str(p.relative_to(ROOT)): sorted(n for n in imports_of(p)
                                                   if n.split(".")[0] in DEV_TOOLS)
                for base in ("bot", "storage") for p in ROOT.joinpath(base).rglob("*.py")}
    assert {path: names for path, names in reaching.items() if names} == {
        "bot/cli.py": ["aireserve_sim"], "bot/runtime.py": ["aireserve_sim.config",
                                                            "aireserve_sim.embedded"]}
