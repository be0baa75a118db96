"""Engine: launch rules (invariants 4, 5), provisioning, connections, capacity and listing."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from aireserve_sim.validation import RESERVED_ENV
from bot.reserve import errors as e
from bot.reserve.schemas import (
    Availability,
    ClusterStatus,
    LaunchRequest,
    NodeStatus,
    RecoverySetting,
    ShapeRequest,
    StorageRequest,
    VolumeStatus,
)
from tests.reserve.simulator.test_engine_support import *


def test_launch_creates_a_provisioning_cluster_and_consumes_the_quote():
    engine, _ = make()
    q = quote(engine, storage_gb=1000)
    cluster = launch(engine, q, name="dsv3-serve", image="vllm/vllm-openai:latest",
                     docker_start_cmd=["bash", "-lc", "/workspace/start.sh"],
                     env={"MALLOC_ARENA_MAX": "1", "HF_TOKEN": "hf_secret_value"},
                     ports=["8000/http", "22/tcp"], ssh_keys=[SSH_KEY])
    assert cluster.id.startswith("clu_") and cluster.quote_id == q.id
    assert cluster.status is ClusterStatus.PROVISIONING
    assert (cluster.created_at, cluster.ready_at, cluster.connections) == (START, None, None)
    assert cluster.locked_rate == q.rate  # invariant 1: locked at launch
    assert (cluster.shape, cluster.total_gpus, cluster.location) == (q.shape, 16, q.location)
    assert [n.status for n in cluster.nodes] == [NodeStatus.PROVISIONING] * 2
    assert [(n.rank, n.role, n.gpus) for n in cluster.nodes] == [(0, "primary", 8),
                                                                  (1, "worker", 8)]
    assert [n.interconnect_address for n in cluster.nodes] == ["10.65.0.2", "10.65.0.3"]
    assert all(n.ssh_host is None and n.ssh_port is None for n in cluster.nodes)
    assert engine.get_quote(q.id).launched_cluster_id == cluster.id
    w = cluster.workload
    assert w.env_keys == ["HF_TOKEN", "MALLOC_ARENA_MAX"]  # keys only, sorted
    assert (w.ports, w.ssh_key_count, w.image) == (["8000/http", "22/tcp"], 1,
                                                   "vllm/vllm-openai:latest")
    assert "hf_secret_value" not in json.dumps(cluster.to_wire())
    assert cluster.volume is not None and cluster.volume.created_with_cluster
    assert (cluster.volume.size_gb, cluster.volume.mount_path) == (1000, "/workspace")
    volume = engine.get_volume(cluster.volume.id)
    assert (volume.status, volume.attached_cluster_id, volume.created_with_cluster_id) == (
        VolumeStatus.ATTACHED, cluster.id, cluster.id)
    assert volume.location == q.location
    assert cluster.recovery.auto is False


def test_nodes_boot_one_by_one_so_progress_shows_then_connections_appear():
    engine, clock = make()
    cluster = launch(engine, quote(engine, nodes=4))
    for k in range(4):
        engine.advance(PROVISION)
        cluster = engine.get_cluster(cluster.id)
        up = [n.status is NodeStatus.RUNNING for n in cluster.nodes]
        assert up == [True] * (k + 1) + [False] * (3 - k)
        if k < 3:
            assert cluster.status is ClusterStatus.PROVISIONING and cluster.connections is None
            assert cluster.nodes[0].ssh_host is not None  # a running node shows its SSH
    assert cluster.status is ClusterStatus.RUNNING
    assert cluster.ready_at == START + timedelta(seconds=4 * PROVISION) == clock.now()
    conns = cluster.connections
    assert conns is not None and conns.primary is not None and conns.primary.rank == 0
    assert [c.rank for c in conns.nodes] == [0, 1, 2, 3]
    ports = set()
    for node, conn in zip(cluster.nodes, conns.nodes, strict=True):
        assert conn.ssh is not None
        assert (conn.ssh.host, conn.ssh.port) == (node.ssh_host, node.ssh_port)
        assert conn.ssh.host.startswith("203.0.113.") and conn.ssh.user == "root"
        assert conn.ssh.command == f"ssh -p {conn.ssh.port} root@{conn.ssh.host}"
        assert conn.interconnect_address == node.interconnect_address
        ports.add(conn.ssh.port)
    assert len(ports) == 4
    assert conns.primary.ssh == conns.nodes[0].ssh


def test_every_cluster_gets_its_own_interconnect_subnet_and_ssh_ports():
    engine, _ = make()
    a = launch(engine)
    b = launch(engine)
    assert [n.interconnect_address for n in b.nodes] == ["10.65.1.2", "10.65.1.3"]
    engine.advance(60)
    ports = [n.ssh_port for c in (a, b) for n in engine.get_cluster(c.id).nodes]
    assert len(set(ports)) == 4


@pytest.mark.parametrize(("orchestrator", "roles"), [
    ("none", ["primary", "worker", "worker"]),
    ("slurm", ["slurm_controller", "slurm_compute", "slurm_compute"]),
    ("ray", ["ray_head", "ray_worker", "ray_worker"]),
])
def test_node_roles_follow_the_orchestrator(orchestrator, roles):
    engine, _ = make()
    cluster = launch(engine, quote(engine, nodes=3, orchestrator=orchestrator))
    assert [n.role for n in cluster.nodes] == roles
    assert cluster.orchestrator == orchestrator


def test_auto_recovery_can_be_set_at_launch():
    engine, _ = make()
    assert launch(engine, recovery=RecoverySetting(auto=True)).recovery.auto is True


# --- quote lifecycle at launch (invariant 5) -------------------------------------------------


def test_inv5_launch_needs_an_existing_quote():
    engine, _ = make()
    with pytest.raises(e.NotFound) as caught:
        engine.launch(LaunchRequest(quote_id="qte_missing"))
    assert caught.value.resource == "quote"


def test_inv5_launch_after_expires_at_is_quote_expired():
    engine, _ = make(quote_ttl_seconds=900)
    q = quote(engine)
    engine.advance(900)
    with pytest.raises(e.QuoteExpired) as caught:
        launch(engine, q)
    assert caught.value.expires_at == "2026-11-29T10:15:00Z"
    assert engine.list_clusters() == []


def test_inv5_launch_just_before_expiry_works():
    engine, _ = make(quote_ttl_seconds=900)
    q = quote(engine)
    engine.advance(899)
    assert launch(engine, q).status is ClusterStatus.PROVISIONING


def test_inv5_a_quote_launches_once():
    engine, _ = make()
    q = quote(engine)
    first = launch(engine, q)
    with pytest.raises(e.QuoteConsumed) as caught:
        launch(engine, q)
    assert caught.value.cluster_id == first.id
    assert len(engine.list_clusters()) == 1


# --- repeated quote-bound fields (invariant 4) ----------------------------------------------


@pytest.mark.parametrize(("fields", "field", "quoted", "requested"), [
    ({"shape": ShapeRequest(accelerator=H100, gpus_per_node=8, nodes=4)}, "shape.nodes", 2, 4),
    ({"shape": ShapeRequest(accelerator=H100, gpus_per_node=4, nodes=2)},
     "shape.gpusPerNode", 8, 4),
    ({"shape": ShapeRequest(accelerator="h200-sxm-141gb", gpus_per_node=8, nodes=2)},
     "shape.accelerator", H100, "h200-sxm-141gb"),
    ({"shape": ShapeRequest(accelerator=H100, gpus_per_node=8, nodes=10**30)},
     "shape.nodes", 2, 10**30),
    ({"orchestrator": "ray"}, "orchestrator", "none", "ray"),
    ({"location": "eu-ro"}, "location", "us-tx", "eu-ro"),
    ({"root_disk_gb": 200}, "rootDiskGb", 100, 200),
    ({"storage": StorageRequest(size_gb=500)}, "storage.sizeGb", 1000, 500),
    ({"volume_id": "vol_other"}, "volumeId", None, "vol_other"),
])
def test_inv4_a_different_repeat_is_price_changed(fields, field, quoted, requested):
    engine, _ = make()
    q = quote(engine, storage_gb=1000, location="us-tx")
    with pytest.raises(e.PriceChanged) as caught:
        launch(engine, q, **fields)
    assert (caught.value.status, caught.value.field) == (409, field)
    assert (caught.value.quoted, caught.value.requested) == (quoted, requested)
    assert engine.get_quote(q.id).launched_cluster_id is None  # still usable


def test_inv4_storage_repeated_on_a_quote_without_storage():
    engine, _ = make()
    with pytest.raises(e.PriceChanged) as caught:
        launch(engine, quote(engine), storage=StorageRequest(size_gb=100))
    assert (caught.value.field, caught.value.quoted, caught.value.requested) == (
        "storage", None, {"sizeGb": 100})


def test_inv4_an_identical_repeat_is_accepted():
    engine, _ = make()
    q = quote(engine, storage_gb=1000, location="us-tx", orchestrator="slurm", root_disk_gb=150)
    cluster = launch(engine, q, shape=ShapeRequest(accelerator=H100, gpus_per_node=8, nodes=2),
                     orchestrator="slurm", location="us-tx", root_disk_gb=150,
                     storage=StorageRequest(size_gb=1000))
    assert cluster.locked_rate == q.rate


def test_inv4_repeating_the_defaults_the_quote_chose_is_identical():
    engine, _ = make()
    q = quote(engine)  # no location, no root disk given
    cluster = launch(engine, q, location=q.location, root_disk_gb=100, orchestrator="none")
    assert cluster.location == q.location


# --- workload validation ------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(RESERVED_ENV))
def test_reserved_env_names_are_refused(name):
    engine, _ = make()
    with pytest.raises(e.InvalidRequest) as caught:
        launch(engine, env={name: "3"})
    assert (caught.value.reason, caught.value.field) == ("reserved_env", f"env.{name}")
    assert name in caught.value.message


@pytest.mark.parametrize("key", ["1ABC", "A-B", "", "A B", "É", "X" * 300])
def test_env_names_must_be_shell_identifiers(key):
    engine, _ = make()
    with pytest.raises(e.InvalidRequest) as caught:
        launch(engine, env={key: "v"})
    assert caught.value.field == "env"


@pytest.mark.parametrize("port", ["0/http", "65536/tcp", "80", "80/udp", "abc/http", "",
                                  "8000/HTTP", "99999999999999999999/tcp", " 80/tcp"])
def test_ports_must_be_port_slash_http_or_tcp(port):
    engine, _ = make()
    with pytest.raises(e.InvalidRequest) as caught:
        launch(engine, ports=["22/tcp", port])
    assert (caught.value.field, caught.value.reason) == ("ports[1]", "invalid_port")


def test_valid_ports_pass():
    engine, _ = make()
    assert launch(engine, ports=["1/tcp", "65535/http"]).workload.ports == ["1/tcp", "65535/http"]


@pytest.mark.parametrize("key", ["", "not a key", "ssh-ed25519", "ssh-ed25519 AAAA… alice",
                                 "ssh-foo AAAAC3Nz alice", "ssh-rsa BBBBB3Nz"])
def test_ssh_keys_must_look_like_openssh_public_keys(key):
    engine, _ = make()
    with pytest.raises(e.InvalidRequest) as caught:
        launch(engine, ssh_keys=[SSH_KEY, key])
    assert caught.value.field == "sshKeys[1]"


def test_ssh_key_types_accepted():
    engine, _ = make()
    keys = [SSH_KEY, "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ== bob@host",
            "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTY="]
    assert launch(engine, ssh_keys=keys).workload.ssh_key_count == 3


@pytest.mark.parametrize(("fields", "field"), [
    ({"name": "x" * 65}, "name"), ({"name": ""}, "name"), ({"name": "   "}, "name"),
    ({"name": "bad\nname"}, "name"), ({"image": ""}, "image"), ({"image": "a b"}, "image"),
    ({"docker_start_cmd": []}, "dockerStartCmd"),
])
def test_other_workload_fields_are_checked(fields, field):
    engine, _ = make()
    with pytest.raises(e.InvalidRequest) as caught:
        launch(engine, **fields)
    assert caught.value.field == field


def test_a_64_character_name_is_fine():
    engine, _ = make()
    assert launch(engine, name="n" * 64).name == "n" * 64


# --- payment and capacity --------------------------------------------------------------------


def test_inv10_launch_needs_the_first_hour_of_balance():
    engine, _ = make()
    q = quote(engine)
    engine.set_balance(q.rate.hourly_cents - 1)
    with pytest.raises(e.PaymentRequired) as caught:
        launch(engine, q)
    assert (caught.value.status, caught.value.required_cents, caught.value.balance_cents) == (
        402, q.rate.hourly_cents, q.rate.hourly_cents - 1)
    engine.set_balance(q.rate.hourly_cents)
    assert launch(engine, q).status is ClusterStatus.PROVISIONING


def test_capacity_unavailable_leaves_the_quote_launchable():
    engine, _ = make()
    q = quote(engine, nodes=4, location="us-tx")
    engine.set_capacity(accelerator=H100, location="us-tx", placeable_nodes=3)
    with pytest.raises(e.CapacityUnavailable) as caught:
        launch(engine, q)
    err = caught.value
    assert (err.status, err.accelerator, err.location, err.nodes_placeable) == (
        409, H100, "us-tx", 3)
    assert engine.list_clusters() == [] and engine.get_quote(q.id).launched_cluster_id is None
    engine.set_capacity(accelerator=H100, location="us-tx", placeable_nodes=8)
    assert launch(engine, q).status is ClusterStatus.PROVISIONING


@pytest.mark.parametrize(("availability", "placeable"), [
    (Availability.HIGH, 8), (Availability.MEDIUM, 8), (Availability.LOW, 2),
    (Availability.NONE, 0),
])
def test_placeable_nodes_follow_availability(availability, placeable):
    engine, _ = make()
    engine.set_capacity(accelerator=H100, location="eu-ro", availability=availability)
    for nodes in (2, 3, 8):
        q = quote(engine, nodes=nodes, location="eu-ro")
        if nodes <= placeable:
            assert launch(engine, q).status is ClusterStatus.PROVISIONING
        else:
            with pytest.raises(e.CapacityUnavailable) as caught:
                launch(engine, q)
            assert caught.value.nodes_placeable == placeable


def test_placeable_override_beats_availability_and_can_be_cleared():
    engine, _ = make()
    engine.set_capacity(accelerator=H100, location="us-tx", availability=Availability.NONE,
                        placeable_nodes=8)
    assert launch(engine, quote(engine, nodes=8, location="us-tx")).status == "provisioning"
    engine.set_capacity(accelerator=H100, location="us-tx")  # back to config (high)
    assert launch(engine, quote(engine, nodes=8, location="us-tx")).status == "provisioning"


def test_set_capacity_validates_its_input():
    engine, _ = make()
    with pytest.raises(e.InvalidRequest):
        engine.set_capacity(accelerator="nope", location="us-tx", placeable_nodes=1)
    with pytest.raises(e.InvalidRequest):
        engine.set_capacity(accelerator=H100, location="nope", placeable_nodes=1)
    with pytest.raises(e.InvalidRequest):
        engine.set_capacity(accelerator=H100, location="us-tx", placeable_nodes=-1)
    with pytest.raises(e.InvalidRequest):
        engine.set_capacity(accelerator=H100, location="us-tx", placeable_nodes=10**30)
    with pytest.raises(e.InvalidRequest):
        engine.set_capacity(accelerator=H100, location="us-tx", availability=Availability.OTHER)
    with pytest.raises(e.InvalidRequest):
        engine.set_capacity(accelerator=H100, location="us-tx",
                            availability="plenty")  # type: ignore[arg-type]
    engine.set_capacity(accelerator=H100, location="us-tx",
                        availability="low")  # type: ignore[arg-type]
    assert quote(engine, location="us-tx").availability is Availability.LOW


# --- listing and reading ------------------------------------------------------------------


def test_list_clusters_newest_first_with_a_status_filter():
    engine, _ = make()
    first = launch(engine)
    engine.advance(1)
    second = launch(engine)
    third = launch(engine)  # same instant as second: creation order breaks the tie
    assert [c.id for c in engine.list_clusters()] == [third.id, second.id, first.id]
    engine.terminate(second.id)
    assert [c.id for c in engine.list_clusters({ClusterStatus.TERMINATING})] == [second.id]
    assert [c.id for c in engine.list_clusters({ClusterStatus.PROVISIONING,
                                                ClusterStatus.TERMINATING})] == [
        third.id, second.id, first.id]
    assert [c.id for c in engine.list_clusters(set())] == [third.id, second.id, first.id]


def test_terminated_clusters_are_listed_for_retention_days_then_404():
    engine, _ = make(retention_days=30)
    cluster = launch(engine)
    engine.terminate(cluster.id)
    engine.advance(30 * 86400 - 60)
    assert [c.id for c in engine.list_clusters()] == [cluster.id]
    assert engine.get_cluster(cluster.id).status is ClusterStatus.TERMINATED
    engine.advance(120)
    assert engine.list_clusters() == []
    with pytest.raises(e.NotFound):
        engine.get_cluster(cluster.id)


def test_unknown_cluster_ids_are_404_everywhere():
    engine, _ = make()
    for call in (engine.get_cluster, engine.recover, engine.events,
                 lambda i: engine.terminate(i), lambda i: engine.rename(i, "x"),
                 lambda i: engine.set_auto_recovery(i, True), lambda i: engine.logs(i),
                 lambda i: engine.fail_node(i, 0, "stopped"),
                 lambda i: engine.set_recoverable(i, 0, False)):
        with pytest.raises(e.NotFound) as caught:
            call("clu_missing")
        assert caught.value.resource == "cluster"


def test_a_cluster_names_no_provider_or_fabric():
    engine, clock = make()
    _, cluster = running(engine, clock, storage_gb=100)
    text = json.dumps(cluster.to_wire()).lower()
    text += json.dumps([ln.to_wire() for ln in engine.logs(cluster.id, tail=5000).lines]).lower()
    for word in ("runpod", "infiniband", "rdma", "nvlink", "lambda", "crusoe", "together"):
        assert word not in text


def test_rename():
    engine, _ = make()
    cluster = launch(engine, name="before")
    assert engine.rename(cluster.id, "after").name == "after"
    with pytest.raises(e.InvalidRequest):
        engine.rename(cluster.id, "")
    with pytest.raises(e.InvalidRequest):
        engine.rename(cluster.id, "y" * 65)
