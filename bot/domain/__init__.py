"""The pure core: what a cluster, a request, a policy and money are, and the rules about them.

Owns: the frozen value objects and state machines (models), the spend policy and its evaluator,
what was charged and when (charges, spend), the watcher's and the readiness follower's
decisions, the domain error tree (errors) and the ports (Protocols) the services are given.
Everything takes `now` as an argument; nothing here does I/O.
May import: bot.domain only (and pydantic, the standard library) — never storage, bot.slack,
aiohttp or any other room (pyproject.toml's import-linter contracts).
"""
