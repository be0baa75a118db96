"""Synthetic per-node logs: deterministic lines written as the simulated timeline unfolds.

Lines are stamped to the whole second, the wire's precision, so `since=<a ts we returned>`
(strictly after) never repeats a line. Env values never appear (they may be secrets); only the
injected platform variables do. No line names a provider or a fabric.
"""

from __future__ import annotations

import shlex
from datetime import datetime

from aireserve_sim.state import ClusterRecord, NodeRecord, World
from bot.reserve.schemas import LogLine, Logs

STREAMS = ("stdout", "stderr", "system")
PRIMARY_PORT = 29500


def placed(w: World, cluster: ClusterRecord, node: NodeRecord) -> None:
    image = cluster.image or "default image"
    w.log(node, "system", f"node {node.rank}/{len(cluster.nodes)} ({node.role}) allocated in "
                          f"{cluster.location}; pulling {image}")
    w.log(node, "system", f"interconnect address {node.interconnect_address} assigned")


def booted(w: World, cluster: ClusterRecord, node: NodeRecord) -> None:
    w.log(node, "system", f"node {node.rank} booted; container starting")
    cmd = shlex.join(cluster.docker_start_cmd) if cluster.docker_start_cmd else "(image entrypoint)"
    w.log(node, "stdout", f"$ {cmd}")


def rendezvous(w: World, cluster: ClusterRecord) -> None:
    """Every node meets the primary once the whole cluster is up (NCCL-style lines)."""
    nodes, gpus = len(cluster.nodes), cluster.shape.gpus_per_node
    primary = cluster.nodes[0].interconnect_address
    for node in cluster.nodes:
        w.log(node, "stdout", f"NODE_RANK={node.rank} NUM_NODES={nodes} GPUS_PER_NODE={gpus} "
                              f"WORLD_SIZE={nodes * gpus} PRIMARY_ADDR={primary}")
        w.log(node, "stdout", f"NCCL INFO Bootstrap : Using eth1:{node.interconnect_address}<0>")
        w.log(node, "stdout", f"NCCL INFO rendezvous with {primary}:{PRIMARY_PORT} complete: "
                              f"rank {node.rank} of {nodes}, {nodes * gpus} ranks in total")


def replaced(w: World, node: NodeRecord) -> None:
    w.log(node, "stderr", f"node {node.rank} failed before admission")
    w.log(node, "system", f"re-placing node {node.rank} (same interconnect address)")


def provision_failed(w: World, cluster: ClusterRecord) -> None:
    for node in cluster.nodes:
        w.log(node, "system", "provisioning failed; releasing the node")


def node_failed(w: World, node: NodeRecord, mode: str) -> None:
    if mode == "stopped":
        w.log(node, "system", f"node {node.rank} stopped: the machine exited")
    else:
        w.log(node, "stderr", f"node {node.rank} unhealthy: health check failed")


def recovering(w: World, node: NodeRecord, attempt: int, action: str) -> None:
    w.log(node, "system", f"recovery attempt {attempt}: {action} node {node.rank} "
                          "on the same hardware")


def recovered(w: World, cluster: ClusterRecord, node: NodeRecord) -> None:
    w.log(node, "system", f"node {node.rank} back; interconnect address "
                          f"{node.interconnect_address} kept")
    booted(w, cluster, node)


def skipped(w: World, node: NodeRecord) -> None:
    w.log(node, "stderr", f"node {node.rank} could not be brought back: provider_unrecoverable")


def terminating(w: World, cluster: ClusterRecord) -> None:
    for node in cluster.nodes:
        w.log(node, "system", "terminating: stopping the container")


def terminated(w: World, cluster: ClusterRecord) -> None:
    for node in cluster.nodes:
        w.log(node, "system", "terminated; node released")


def query(
    cluster: ClusterRecord, *, node: int, tail: int, since: datetime | None, stream: str | None
) -> Logs:
    """The last `tail` lines of one node after `since` (strictly), optionally of one stream."""
    lines = [
        (ts, s, text)
        for ts, s, text in cluster.nodes[node].logs
        if (since is None or ts > since) and (stream is None or s == stream)
    ][-tail:]
    next_since = lines[-1][0] if lines else since
    return Logs(
        cluster_id=cluster.id,
        node=node,
        lines=[LogLine(ts=ts, stream=s, line=text) for ts, s, text in lines],
        next_since=next_since,
    )
