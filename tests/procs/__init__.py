"""Real processes for tests: the AI Reserve simulator and bots as subprocesses, FakeSlack in here.

    async with procs.world(tmp_path, database_url=url) as w:   # simulator + FakeSlack, no bot yet
        bot = await w.bot()                  # `python -m bot serve`; returns once it serves HTTP
        reply = await bot.requests.slash(text="quote h100x8 nodes=2", user_id=ALICE,
                                         channel_id=GENERAL)      # signed exactly as Slack does
        await w.sim.fault("DELETE /v1/clusters/{id}", status=500, count=3)
        await w.advance(60)                  # the simulator's virtual clock AND every bot's clock
        msg = await wait_for(lambda: w.slack.dms(ALICE), what="a DM to alice")
        rc = await bot.stop(signal.SIGTERM)  # signal, wait (bounded) and return the exit code
        await bot.start()                    # the same bot again: same env, same database
        bot.logs()                           # everything this bot printed, all its runs

- `world(tmp_path, database_url=None, profile="fast")`: the simulator (`python -m bot simulator
  --port 0 --virtual-clock --start-at now`, its URL read from its banner) and a FakeSlack on
  127.0.0.1:0 recording every Web API call (`w.slack`: `messages`, `dms`, `ephemerals`,
  `calls_to`, `fail_next` …). `database_url` defaults to a SQLite file in `tmp_path`; pass the
  `pg_url` fixture's URL for the throwaway PostgreSQL. On exit every bot still running is
  SIGKILLed, the simulator stopped, and FakeSlack must have seen no protocol violation.
- `w.bot(name="bot", env=None, policy=None)` starts a bot (several may share the world: replicas).
  Its env: FakeSlack, the simulator, the database, APPROVALS_CHANNEL/APPROVERS (bob, carol),
  POLL_INTERVAL_SECONDS=1, PORT=0 and INTERNAL_PORT=0 (the bound URLs are read from its log),
  CLOCK_OFFSET_FILE;
  `env` adds or overrides (a value None removes). The process runs with cwd=`tmp_path` (no
  stray `.env`) and PYTHONPATH=this repository, so the worktree's code is what runs.
- `BotProcess`: `url`, `internal_url`, `requests` (SlackRequests on this bot), `pid`,
  `running`, `get(path, public=False)` → (status, body) from the internal port (or the
  public), `ready()` (does /readyz answer 200), `signal(sig)`, `wait(within)` → rc,
  `stop(sig, within)` → rc, `kill()` (SIGKILL + wait), `start()` (again, after an exit),
  `logs()`, `wait_for_log(text)`.
- `SimProcess` (`w.sim`): `base_url`, `api_key`, `admin(path, body, method)` on `/_sim`,
  `advance(seconds)`, `fault(route, status=…, count=…, delay_seconds=…, retry_after_seconds=…)`,
  `clear_faults()`, `fail_node(cluster_id, rank, mode)`, `clusters()` (the provider's view).
- `w.advance(seconds)`: moves the simulator's virtual clock and the offset every bot adds to
  its wall clock, so quotes expire and reminders come due without waiting.
- `w.request_launch(bot, text=…, user=ALICE)`: quote, Request launch, submit → the approval card.
- `w.database()`: a `storage.db.Database` on the bots' database, to read rows (dispose is done);
  `w.requests()`: every launch request in it.
- `wait_for(check, within=…, what=…)`: poll `check` (sync or async) until it returns something
  truthy, which it returns; AssertionError naming `what` at the deadline. Never sleep instead.
- A failed test's report ends with a note (the `world()` it ran in): the Slack calls FakeSlack
  refused, the last 40 it answered, and the end of every process's log.

The parts: child.py (one child process, its log, `wait_for`), simulator.py (`SimProcess`),
bots.py (`BotProcess`), worlds.py (`World`, `world`), note.py (a failure's note).
"""

from __future__ import annotations

from tests.e2e.harness import ALICE, APPROVALS, BOB, CAROL, DAVE, GENERAL, SECRET
from tests.procs.bots import BotProcess
from tests.procs.child import REPO, Child, base_env, wait_for
from tests.procs.simulator import SimProcess
from tests.procs.worlds import World, world

__all__ = ["ALICE", "APPROVALS", "BOB", "CAROL", "DAVE", "GENERAL", "REPO", "SECRET", "BotProcess",
           "Child", "SimProcess", "World", "base_env", "wait_for", "world"]
