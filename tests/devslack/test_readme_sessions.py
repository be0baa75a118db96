"""The README's local-workspace walkthroughs, replayed through `make run`'s own session.

Every ```console block right after a `<!-- local session -->` line in README.md is a transcript:
lines at a prompt (`alice@#general> /cluster quote …`), a form field's prompt with its answer
(`  No SSH key? [(empty)]: 1`) and a confirm's answer (`  Approve $62.43/h (y) / Cancel (n)? y`)
are typed, in order, into `devslack.local.session` (the bot, the embedded simulator and the
terminal, as `make run` starts them); every other line is what the terminal must show by then,
in that order (`…` stands for anything within a line). So a walkthrough that stops being true —
a button that moved, a text that changed — fails here, not in a reader's terminal.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from bot.config.settings import load_settings
from devslack.local import session

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"<!-- local session -->\n```console\n(.*?)```", re.S)
TYPED = (re.compile(r"^\w+@\S+> (.*)$"),  # a line at the prompt
         re.compile(r"^  .+? \[.*\]: ?(.*)$"),  # a form field, and what was typed at it
         re.compile(r"^  .+ \(y\) / .+ \(n\)\? (.*)$"))  # a confirm dialog's answer
# The terminal's own refusals ("? there is no button …", "? commands start with /"), a failed
# `sim` line, a bad answer from the bot: none belongs in a walkthrough.
REFUSED = re.compile(r"^(\? |sim: |⚠)|Traceback", re.M)


def sessions() -> list[str]:
    return BLOCK.findall(README.read_text(encoding="utf-8"))


def typed(line: str) -> str | None:
    for pattern in TYPED:
        if (match := pattern.match(line)) is not None:
            return match[1]
    return None


def shown(line: str) -> re.Pattern[str]:
    return re.compile(".*?".join(re.escape(part) for part in line.split("…")))


def test_the_readme_has_walkthroughs():
    assert len(sessions()) >= 2


@pytest.mark.parametrize("block", sessions(),
                         ids=[f"session{i}" for i in range(1, len(sessions()) + 1)])
async def test_a_readme_walkthrough_replays(block: str, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no .env, and the SQLite file lands here
    lines = [line.rstrip() for line in block.splitlines() if line.strip()]
    inputs = [t for line in lines if (t := typed(line)) is not None] + ["quit"]
    output = io.StringIO()
    settings = load_settings({"DATABASE_URL": f"sqlite:///{tmp_path / 'bot.db'}"})
    await session(settings, input=io.StringIO("".join(f"{t}\n" for t in inputs)),
                  output=output)
    transcript = output.getvalue()
    at = 0
    for line in lines:
        found = shown(line.strip()).search(transcript, at)
        assert found is not None, (f"README shows {line.strip()!r}, which the session did not "
                                   f"(from here on):\n{transcript[at:at + 3000]}")
        at = found.end()
    refused = REFUSED.search(transcript)
    assert refused is None, f"the session refused a line:\n{transcript[refused.start() - 2000:]}"
