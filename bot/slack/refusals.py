"""What Slack's refusals mean to the outbox (bot/slack/outbox.py): which errors leave a post to be
tried again, which say a target is gone until a person fixes it, which of those are held until
it is back, and what a claimed post came to (`Outcome`)."""

from __future__ import annotations

import enum

import aiohttp
from slack_sdk.errors import SlackApiError

# What a refused or lost post raises: the claim is released and the post tried again later.
POST_ERRORS = (SlackApiError, aiohttp.ClientError, TimeoutError)
# Posting into a channel the bot can't reach: tell the requester by DM instead.
DM_INSTEAD = {"channel_not_found", "not_in_channel", "is_archived", "restricted_action"}
# Slack's answers that mean the target can't receive anything until a person fixes it.
# (`account_inactive` is not one: it is Slack refusing the bot's own token, bot/slack/tokens.py.)
GONE = frozenset({"user_not_found", "user_disabled", "cannot_dm_bot",
                  "channel_not_found", "is_archived", "not_in_channel"})
# Of those, the ones a person undoes (unarchive the channel, invite the bot back): what is meant
# for such a channel is held — a notice stays pending, a stored post stays stored — and goes
# out once it works again (bot/slack/unreachable.py), never dropped as "gone for good".
HELD = frozenset({"is_archived", "not_in_channel"})


def reason(exc: BaseException) -> str:
    """A log-safe reason: Slack's error code, or the exception's type (never a message body)."""
    if isinstance(exc, SlackApiError):
        return str(exc.response.get("error"))
    return type(exc).__name__


def gone(exc: BaseException) -> str | None:
    """Slack's code when `exc` says the target is unreachable for good (`GONE`), else None."""
    if isinstance(exc, SlackApiError):
        code = str(exc.response.get("error"))
        return code if code in GONE else None
    return None


class Unreachable(SlackApiError):
    """A post to a target recorded undeliverable: Slack was not called (or just refused it)."""

    def __init__(self, target: str, code: str) -> None:
        # A SlackApiError, so every handler of Slack refusals also handles this one.
        super().__init__(f"{target} is unreachable ({code})",  # type: ignore[no-untyped-call]
                         {"ok": False, "error": code})
        self.target = target
        self.code = code


class Outcome(enum.Enum):
    POSTED = "posted"  # this call posted it
    DONE = "done"  # posted earlier (by this replica or another)
    BUSY = "busy"  # another replica holds a live claim: it is posting it now
    UNDELIVERABLE = "undeliverable"  # the target refuses posts for good: not posted, not retried
