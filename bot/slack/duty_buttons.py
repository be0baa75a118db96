"""The action table's rows for who is on a degraded cluster and for a storm's digest:
Acknowledge, Snooze 1 h and Recover all mine (joined into bot/slack/actions.py BUTTONS)."""

from __future__ import annotations

from typing import Any

from bot.domain.models import ClusterRecord
from bot.services.storms import RecoverAll
from bot.slack.blocks import digest as digest_blocks
from bot.slack.blocks.format import hourly
from bot.slack.buttons import Button, Once
from bot.slack.ids import Action, DigestRef, DutyRef

DUTY_BUTTONS: dict[str, Button[Any, Any]] = {
    Action.ACKNOWLEDGE: Button[DutyRef, ClusterRecord](
        DutyRef,
        lambda s, r, a: s.duty_service().acknowledge(cluster_id=r.cluster_id,
                                                     episode=r.episode, actor=a),
        lambda r, c: f"Acknowledged: you are on `{c.id}`, and nobody is escalated for this "
                     f"degraded episode. It bills {hourly(c.hourly_cents)} until it recovers "
                     "or is terminated.",
        Once("acknowledge", lambda r: (r.cluster_id, str(r.episode)),
             lambda r, c, by: f"Already acknowledged by {by}: they are on `{c.id}`.")),
    Action.SNOOZE: Button[DutyRef, ClusterRecord](
        DutyRef,
        lambda s, r, a: s.duty_service().snooze(cluster_id=r.cluster_id, episode=r.episode,
                                                shown=r.snoozes, actor=a),
        lambda r, c: f"Snoozed for an hour: nobody is escalated for `{c.id}` before then. It "
                     f"bills {hourly(c.hourly_cents)} meanwhile.",
        Once("snooze", lambda r: (r.cluster_id, f"{r.episode}.{r.snoozes}"),
             lambda r, c, by: f"Already snoozed by {by} from this notice: nobody is escalated "
                              f"for `{c.id}` before the hour is up.")),
    # Once per person and showing, inside the service (the claim's version names the presser).
    Action.RECOVER_ALL_MINE: Button[DigestRef, RecoverAll](
        DigestRef,
        lambda s, r, a: s.storm_service().recover_all_mine(digest_id=r.digest_id,
                                                           degraded=r.degraded, actor=a),
        lambda r, done: digest_blocks.recover_all_said(done)),
}
