"""How the owner reaches a cluster: SSH commands, interconnect addresses, the volume's mount and
the ports the launch asked for. Read fresh from AI Reserve when asked for, sent to the owner's DM
only — never stored, never posted to a channel."""

from __future__ import annotations

from bot.domain.models import Frozen


class NodeConnection(Frozen):
    rank: int
    ssh_command: str | None
    interconnect_address: str | None
    role: str | None = None  # primary | worker | slurm_controller | … (the orchestrator's)


class ConnectionDetails(Frozen):
    """SSH details: for the owner's DM only — never stored, never posted to a channel."""

    cluster_id: str
    primary_ssh_command: str
    nodes: tuple[NodeConnection, ...]
    volume_mount: str | None = None  # where the shared volume is mounted on every node
    # The ports the launch asked for (`8000/http`) and the primary's SSH they are reached
    # through: the contract publishes no other address for them (bot/domain/tunnels.py).
    ports: tuple[str, ...] = ()
    primary_host: str | None = None
    primary_port: int | None = None
    primary_user: str | None = None
