"""Cluster Bot: Slack chat-ops for AI Reserve GPU clusters (docs/architecture.md: the map).

Owns: its rooms — app (the process wired together), config (settings and the policy file),
observability (metrics, reachability, db status), slack, jobs, services, reserve, domain — and,
at this root, only what every layer uses: clock.py (time, passed in) and logs.py (the context
every log line carries). `python -m bot` is __main__.py.
May import: at this root, the standard library only.
"""
