"""`python -m bot` and the `cluster-bot` script.

The cyclic garbage collector is off while the process imports and wires itself up: start-up
allocates a few hundred thousand objects (modules, classes, schemas) and frees almost none, so
the collections it would trigger walk a growing heap for nothing (about a fifth of the start-up
time on two cores). `cluster-bot serve` turns it back on once it is listening (runtime.serve,
after freezing what start-up built); every other command at once (cli.main).
"""

import gc


def main() -> int:
    gc.disable()
    from bot.cli import main as cli

    return cli()


if __name__ == "__main__":
    raise SystemExit(main())
