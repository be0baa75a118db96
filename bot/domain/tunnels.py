"""Ports a launch asked for, reached through the primary's SSH (the contract publishes no
other address for them): one ready `ssh -L` line per port, for the owner's DM only."""

from __future__ import annotations

import re
from collections.abc import Sequence

_PORT = re.compile(r"^(?P<port>\d{1,5})/(?P<proto>http|tcp)$")
SSH_PORT = 22
PRIVILEGED = 1024
LOCAL_OFFSET = 10000  # a port under 1024 needs root locally: forward it from 10000 + port


def tunnel_lines(ports: Sequence[str], *, host: str, ssh_port: int,
                 user: str) -> list[tuple[str, str]]:
    """(`8000/http`, `ssh -L 8000:localhost:8000 -N -p 22001 root@203.0.113.10`) for each
    port but SSH's own (the session itself is that one)."""
    lines = []
    for port in ports:
        match = _PORT.match(port)
        if match is None or int(match["port"]) == SSH_PORT:
            continue
        remote = int(match["port"])
        local = remote if remote >= PRIVILEGED else LOCAL_OFFSET + remote
        lines.append((port, f"ssh -L {local}:localhost:{remote} -N -p {ssh_port} {user}@{host}"))
    return lines
