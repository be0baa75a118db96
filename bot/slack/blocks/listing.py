"""`/cluster list` with a **Status** and a **Terminate** button for each listed cluster."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from itertools import accumulate

from slack_sdk.models.blocks import Block

from bot.domain.models import ClusterRecord
from bot.slack.blocks.cluster import TERMINABLE, cluster_list, terminate_button
from bot.slack.blocks.format import truncate
from bot.slack.blocks.message import Message, actions, button, compose
from bot.slack.ids import Action, ClusterRef

ROWS = 20  # Slack's 50 blocks per message: the rest by `/cluster status <id>`
PAYLOAD_BUDGET = 12_000  # of Slack's ~13k characters per message


def cluster_list_with_buttons(clusters: Sequence[ClusterRecord], *, now: datetime) -> Message:
    """The list, then a row of buttons per cluster, as many as fit the message."""
    listed = cluster_list(clusters, now=now)
    used = len(json.dumps([b.to_dict() for b in listed.blocks]))
    return compose(listed.text, [*listed.blocks, *rows(clusters, room=PAYLOAD_BUDGET - used)],
                   key="list")


def rows(clusters: Sequence[ClusterRecord], *, room: int) -> list[Block]:
    """**Status** and **Terminate** (its confirm and claim) for the first clusters that fit."""
    made = [actions(button(f"Status {truncate(c.id, 40)}", action_id=Action.CLUSTER_STATUS,
                           value=ClusterRef(cluster_id=c.id).pack()),
                    *([terminate_button(c)] if c.status in TERMINABLE else []))
            for c in clusters[:ROWS]]
    sizes = accumulate(len(json.dumps(row.to_dict())) for row in made)
    return [row for row, size in zip(made, sizes, strict=True) if size <= room]
