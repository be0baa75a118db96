"""Benchmarks: measure and report figures (never pass/fail). Run them with `make bench`.

Each module has an `async def run() -> list[Table]` that starts what it needs on loopback
(port 0, temporary SQLite files) and returns its figures; `python -m benchmarks` runs them all
and prints one report. They are not part of the test suite: timings depend on the machine.
"""
