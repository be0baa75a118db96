"""What a failed real-process test's report adds: the times a wait began and gave up (in the
processes' own log format), the Slack calls and the end of every process's log."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.procs.bots import BotProcess
    from tests.procs.simulator import SimProcess
    from tests.procs.worlds import World


def hms(at: datetime) -> str:
    """`18:55:40.361` in local time, as the processes' log lines say it."""
    at = at.astimezone()
    return f"{at:%H:%M:%S}.{at.microsecond // 1000:03d}"


def what_happened(w: World, lines: int = 80, calls: int = 40) -> str:
    """For a failed test's report: the Slack calls FakeSlack refused, the last ones it answered
    (when the bot told Slack what: paced per channel, they show where its seconds went) and the
    end of each process's log (a bot's view of a modal that never opened, an answer that never
    came). `PROCS_LOG_LEVEL=DEBUG` on a rerun logs each AI Reserve call too."""
    refused = [f"{c.at:%H:%M:%S} {c.method} -> {c.status} {c.error}" for c in w.slack.calls
               if c.status != 200 or c.error]
    told = [f"{hms(c.at)} {c.method} {c.args.get('channel') or ''}".rstrip()
            for c in w.slack.calls[-calls:]]
    parts = ["Slack calls refused: " + ("; ".join(refused) or "none"),
             f"--- the last {len(told)} Slack calls ---\n" + "\n".join(told)]
    procs: list[tuple[str, SimProcess | BotProcess]] = [("simulator", w.sim)]
    for name, proc in procs + [(bot.name, bot) for bot in w.bots]:
        tail = proc.logs().splitlines()[-lines:]
        parts.append(f"--- the end of {name}'s log ---\n" + "\n".join(tail))
    return "\n".join(parts)
