"""`python -m bot` and the `cluster-bot` script.

The cyclic garbage collector is off while the process imports and wires itself up: start-up
allocates a few hundred thousand objects (modules, classes, schemas) and frees almost none, so
the collections it would trigger walk a growing heap for nothing (about a fifth of the start-up
time on two cores). `cluster-bot serve` turns it back on as it starts listening, after freezing
what start-up built, with full collections kept for lulls (bot/app/collector.py); every other
command at once (cli.main).

The GIL is handed over every millisecond instead of every 5: work the bot runs on threads
(comparing a page of the listing, converting many rows, aiosqlite's queries) would otherwise
keep the event loop — and the acks it owes Slack — waiting up to 5 ms each time it wants the
interpreter back, several times per request.
"""

import gc
import sys

SWITCH_INTERVAL_SECONDS = 0.001


def main() -> int:
    gc.disable()
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    from bot.app.cli import main as cli

    return cli()


if __name__ == "__main__":
    raise SystemExit(main())
