"""Provider codes in words: the ONE place a code like `payment_grace_expired` becomes text.

Nothing a person reads carries a raw code: termination reasons, node and cluster errors go
through `why_terminated` / `error_words`. A code added later by AI Reserve is shown as words
("some new code" for `some_new_code`), never as the bare identifier.
"""

from __future__ import annotations

import re

# Who asked the bot to terminate (`ClusterRecord.terminate_requested_by`) when no person did.
BY_SPEND_POLICY = "spend-policy"
BY_PAYMENT_GRACE = "payment-grace"
BY_IDLE_RULE = "idle-rule"

_CODE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$")
_ERRORS = {
    "capacity_unavailable": "AI Reserve has no capacity to place every node right now",
    "provision_failed": "AI Reserve could not provision it",
    "provider_unrecoverable": "AI Reserve could not bring the node back",
    "recovery_exhausted": "every recovery attempt of this episode is spent",
    "node_stopped": "the node stopped",
    "node_unhealthy": "the node turned unhealthy",
    "not_found_at_provider": "AI Reserve no longer knows this cluster",
    "payment_grace_expired": "the payment grace ended on an unpaid hour",
}


def _words(code: str) -> str:
    return " ".join(code.replace("_", " ").replace("-", " ").split())


def error_words(code: str | None) -> str | None:
    """A provider error code (`lastError`) as words; a sentence (the bot's own) as it is;
    None stays None."""
    if not code:
        return None
    if not _CODE.match(code):
        return code
    return _ERRORS.get(code, _words(code))


def why_terminated(*, reason: str | None, requested_by: str | None) -> str:
    """Why a cluster ended, in words (mrkdwn: a person is a mention).

    `reason` is AI Reserve's `terminationReason`; `requested_by` who asked the bot to end it
    (a Slack user id, `BY_SPEND_POLICY`, `BY_IDLE_RULE`, `BY_PAYMENT_GRACE`, or None: not the
    bot).
    """
    if reason == "payment_grace_expired" or requested_by == BY_PAYMENT_GRACE:
        return "the payment grace ended on an unpaid hour (AI Reserve terminated it)"
    if reason == "not_found_at_provider":
        return "it is gone at AI Reserve (the provider no longer knows it)"
    if requested_by == BY_IDLE_RULE:
        return ("it was idle and nobody kept it within the spend policy's grace (its idle rule "
                "fired; the spend policy terminated it)")
    if requested_by == BY_SPEND_POLICY:
        return "its approved spend envelope ran out (the spend policy terminated it)"
    if requested_by:
        return f"requested by <@{requested_by}>"
    if reason in (None, "requested"):
        return "terminated outside the bot (at AI Reserve directly)"
    return f"AI Reserve ended it: {_words(reason)}"
