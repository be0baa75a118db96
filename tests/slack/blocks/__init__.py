"""Factories and payload checks shared by the Block Kit builder tests."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from bot.domain.models import (
    Approval,
    ClusterRecord,
    ClusterState,
    Decision,
    LaunchRequest,
    PriceLine,
    QuoteInfo,
    QuoteSpec,
    RequestStatus,
    ShapeSpec,
    VolumeRecord,
    Workload,
)
from bot.domain.watch import Notice, NoticeFacts, NoticeKind
from bot.slack.blocks.message import Message
from bot.slack.ids import Action

# What a test gets from `from tests.slack.blocks import *`: the factories and the payload checks.
__all__ = ["EXTREME_CLUSTER", "HOSTILE", "LONG_ID", "NOW", "SECRET", "SSH_KEY", "all_text",
           "assert_confirms_state", "assert_escaped", "block_dicts", "button", "buttons",
           "check_blocks", "check_message", "check_view", "checked_text", "keep_beside_terminate",
           "make_approval", "make_cluster", "make_notice", "make_quote", "make_request",
           "make_volume", "make_workload", "mrkdwn_texts", "strings"]

NOW = datetime(2026, 11, 29, 21, 31, tzinfo=UTC)
HOSTILE = "<!channel> <script>alert(1)</script> & <@U0EVIL> ünïcödé ✓ " + "x" * 200
SECRET = "hf_S3CR3T_VALUE_never_in_slack"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKEY alice@example"


def make_quote(**changes: Any) -> QuoteInfo:
    shape = changes.pop("shape", ShapeSpec(accelerator="h100-sxm-80gb", gpus_per_node=8, nodes=2))
    fields: dict[str, Any] = {
        "id": "qte_7Gf2kQ",
        "spec": QuoteSpec(shape=shape, storage_gb=1000, root_disk_gb=100),
        "accelerator_name": "NVIDIA H100 80GB SXM",
        "location": "us-tx",
        "hourly_cents": 6253,
        "per_gpu_hourly_cents": 390,
        "lines": (
            PriceLine(label="GPUs", detail="16 × $3.90/h", hourly_cents=6240),
            PriceLine(label="Root disks", detail="2 × 100 GB", hourly_cents=3),
            PriceLine(label="Shared volume", detail="1,000 GB", hourly_cents=10),
            PriceLine(label="Interconnect", detail="private, between nodes", hourly_cents=0),
        ),
        "availability": "high",
        "created_at": NOW - timedelta(seconds=60),
        "expires_at": NOW + timedelta(minutes=14, seconds=30),
        "requested_by": "U0ALICE",
        "channel_id": "C0GPU",
    }
    fields.update(changes)
    return QuoteInfo(**fields)


def make_workload(**changes: Any) -> Workload:
    fields: dict[str, Any] = {
        "name": "dsv3-serve",
        "image": "vllm/vllm-openai:latest",
        "docker_start_cmd": ("bash", "-lc", "/workspace/start.sh"),
        "env": {"MALLOC_ARENA_MAX": "1", "HF_TOKEN": SECRET},
        "ports": ("8000/http", "22/tcp"),
        "ssh_keys": (SSH_KEY,),
        "auto_recovery": False,
    }
    fields.update(changes)
    return Workload(**fields)


def make_request(**changes: Any) -> LaunchRequest:
    fields: dict[str, Any] = {
        "id": "req_1",
        "quote_id": "qte_7Gf2kQ",
        "requester_id": "U0ALICE",
        "team_id": "T1",
        "channel_id": "C0GPU",
        "workload": make_workload(),
        "status": RequestStatus.PENDING,
        "hourly_cents": 6253,
        "created_at": NOW - timedelta(seconds=30),
        "updated_at": NOW - timedelta(seconds=30),
    }
    fields.update(changes)
    return LaunchRequest(**fields)


def make_approval(decision: Decision = Decision.APPROVE, **changes: Any) -> Approval:
    fields: dict[str, Any] = {
        "request_id": "req_1",
        "approver_id": "U0BOB",
        "decision": decision,
        "quote_id": "qte_7Gf2kQ",
        "hourly_cents": 6253,
        "at": NOW - timedelta(seconds=5),
    }
    fields.update(changes)
    return Approval(**fields)


def make_notice(kind: NoticeKind, key: str | None = None, **facts: Any) -> Notice:
    """A notice about make_cluster()'s cluster, keyed `<kind>:1` unless `key` is given."""
    return Notice(cluster_id="clu_9xQe1", key=key or f"{kind.value}:1", kind=kind,
                  facts=NoticeFacts(**facts), created_at=NOW)


def make_cluster(**changes: Any) -> ClusterRecord:
    fields: dict[str, Any] = {
        "id": "clu_9xQe1",
        "request_id": "req_1",
        "owner_id": "U0ALICE",
        "channel_id": "C0GPU",
        "name": "dsv3-serve",
        "shape": ShapeSpec(accelerator="h100-sxm-80gb", gpus_per_node=8, nodes=2),
        "accelerator_name": "NVIDIA H100 80GB SXM",
        "location": "us-tx",
        "hourly_cents": 6253,
        "status": ClusterState.RUNNING,
        "nodes_ready": 2,
        "created_at": NOW - timedelta(hours=2, minutes=20),
        "ready_at": NOW - timedelta(hours=2, minutes=10),
        "accrued_cents": 3 * 6253,
        "accrued_hours": 3,
        "volume_id": "vol_3kP0",
        "volume_created_with_cluster": True,
        "updated_at": NOW,
    }
    fields.update(changes)
    return ClusterRecord(**fields)


def make_volume(**changes: Any) -> VolumeRecord:
    fields: dict[str, Any] = {
        "id": "vol_3kP0",
        "owner_id": "U0ALICE",
        "cluster_id": "clu_9xQe1",
        "name": "weights",
        "size_gb": 1000,
        "location": "us-tx",
        "hourly_cents": 10,
        "status": "available",
        "orphaned_since": NOW - timedelta(days=2),
        "next_reminder_at": NOW,
        "updated_at": NOW,
    }
    fields.update(changes)
    return VolumeRecord(**fields)


# Every user/provider string at its worst: 255 characters, non-ASCII, mentions and markup.
LONG_ID = "clu_" + "ü" * 251
EXTREME_CLUSTER: dict[str, Any] = {
    "id": LONG_ID, "name": (HOSTILE + "ñ" * 255)[:255], "location": HOSTILE,
    "accelerator_name": HOSTILE, "volume_id": HOSTILE, "last_error": HOSTILE * 10,
    "termination_reason": HOSTILE,
}


# --- payload checks ----------------------------------------------------------------------------

LIMITS = {"section": 3000, "field": 2000, "header": 150, "button": 75,
          "confirm_title": 100, "confirm_text": 300, "confirm_ok": 30, "confirm_deny": 30}


def block_dicts(msg: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = msg.as_kwargs()["blocks"]
    return blocks


def check_blocks(blocks: list[Block], *, max_blocks: int) -> list[dict[str, Any]]:
    """Validate with slack_sdk, re-parse, and check the limits slack_sdk does not enforce."""
    assert 0 < len(blocks) <= max_blocks
    dicts = []
    for block in blocks:
        block.validate_json()
        as_dict = block.to_dict()
        reparsed = Block.parse(as_dict)
        assert reparsed is not None
        assert reparsed.to_dict() == as_dict
        dicts.append(as_dict)
    ids = [d.get("block_id") for d in dicts]
    assert all(ids) and len(set(ids)) == len(ids), ids
    for d in dicts:
        _check_limits(d)
    return dicts


def check_message(msg: Message) -> list[dict[str, Any]]:
    assert msg.text.strip() and len(msg.text) <= 3000
    dicts = check_blocks(list(msg.blocks), max_blocks=50)
    assert len(json.dumps(msg.as_kwargs())) < 13_000
    return dicts


def checked_text(msg: Message) -> str:
    """All of a message's text, once it is checked (check_message)."""
    check_message(msg)
    return all_text(msg)


def check_view(view: View) -> dict[str, Any]:
    view.validate_json()
    as_dict = view.to_dict()
    check_blocks(list(view.blocks), max_blocks=100)
    assert len(as_dict["title"]["text"]) <= 24
    assert len(as_dict["submit"]["text"]) <= 24
    assert len(as_dict["close"]["text"]) <= 24
    assert len(as_dict.get("private_metadata", "")) <= 3000
    return as_dict


def _check_limits(block: dict[str, Any]) -> None:
    kind = block["type"]
    if kind == "section":
        if "text" in block:
            assert len(block["text"]["text"]) <= LIMITS["section"]
        assert len(block.get("fields", [])) <= 10
        for field in block.get("fields", []):
            assert len(field["text"]) <= LIMITS["field"]
    if kind == "header":
        assert len(block["text"]["text"]) <= LIMITS["header"]
    if kind == "context":
        assert 0 < len(block["elements"]) <= 10
    if kind == "actions":
        for element in block["elements"]:
            assert len(element["text"]["text"]) <= LIMITS["button"]
            assert len(element["value"]) <= 2000
            if "confirm" in element:
                c = element["confirm"]
                assert len(c["title"]["text"]) <= LIMITS["confirm_title"]
                assert len(c["text"]["text"]) <= LIMITS["confirm_text"]
                assert len(c["confirm"]["text"]) <= LIMITS["confirm_ok"]
                assert len(c["deny"]["text"]) <= LIMITS["confirm_deny"]


def strings(obj: Any) -> list[str]:
    """Every string in a payload (texts, values, ids), for "never contains" checks."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in strings(v)]
    if isinstance(obj, list | tuple):
        return [s for v in obj for s in strings(v)]
    return []


def all_text(msg: Message) -> str:
    return "\n".join([msg.text, *strings(block_dicts(msg))])


def mrkdwn_texts(msg: Message) -> list[str]:
    """The fallback text and every mrkdwn text object: what Slack parses for mentions."""
    found = [msg.text]

    def walk(obj: Any) -> None:
        if isinstance(obj, dict):
            if obj.get("type") == "mrkdwn":
                found.append(obj["text"])
            for v in obj.values():
                walk(v)
        elif isinstance(obj, list):
            for v in obj:
                walk(v)

    walk(block_dicts(msg))
    return found


def assert_escaped(msg: Message, *, user_mentions_kept: bool = False) -> None:
    """No broadcast mention or markup from HOSTILE survives in what Slack parses.

    `user_mentions_kept`: texts passed through `format.mrkdwn` keep `<@U…>` by design.
    """
    for text in mrkdwn_texts(msg):
        assert "<!channel>" not in text
        assert "<script>" not in text
        assert ("<@U0EVIL>" in text) <= user_mentions_kept


def assert_confirms_state(msg: Message, amount: str) -> None:
    """Every confirm dialog in `msg` states `amount` (e.g. "$62.53 per hour")."""
    confirms = [b["confirm"] for b in buttons(msg) if "confirm" in b]
    for c in confirms:
        assert amount in c["text"]["text"], c["text"]["text"]


def buttons(msg: Message) -> list[dict[str, Any]]:
    return [e for d in block_dicts(msg) if d["type"] == "actions" for e in d["elements"]]


def keep_beside_terminate(msg: Message, keep_action: str) -> dict[str, Any]:
    """A DM's two buttons: Terminate, then the one that keeps the cluster (returned)."""
    [terminate, keep] = buttons(msg)
    assert (terminate["action_id"], keep["action_id"]) == (Action.TERMINATE, keep_action)
    return keep


def button(msg: Message, action_id: str) -> dict[str, Any]:
    found = [b for b in buttons(msg) if b["action_id"] == action_id]
    assert len(found) == 1, [b["action_id"] for b in buttons(msg)]
    return found[0]
