"""The button table: every action id the bot's buttons carry has one row (or one of the two
quote listeners), and every row that changes state without its own compare-and-set claims the
press first."""

from bot.slack.actions import BUTTONS
from bot.slack.ids import Action


def test_every_action_has_exactly_one_listener_row():
    assert set(BUTTONS) | {Action.QUOTE_REQUEST_LAUNCH, Action.QUOTE_DISCARD,
                        Action.GROW_VOLUME, Action.REJECT_WITH_REASON,
                        Action.QUOTE_WAIT_FOR_STOCK} == set(Action.ALL)
    assert not set(BUTTONS) & {Action.QUOTE_REQUEST_LAUNCH, Action.QUOTE_DISCARD}


def test_only_approve_and_reject_rely_on_the_service_alone():
    # Their compare-and-set is per approver on the request row (two approvers may both act);
    # an extension's card likewise, on the extension's row; Withdraw's is pending → withdrawn on
    # the request row (it happens once).
    unclaimed = {action for action, row in BUTTONS.items() if row.once is None}
    # Quote this and Status only read (each press prices or looks afresh): nothing to claim.
    assert unclaimed == {Action.APPROVE, Action.REJECT, Action.QUOTE_THIS,
                         Action.CLUSTER_STATUS, Action.EXTENSION_APPROVE,
                         Action.EXTENSION_REJECT, Action.WITHDRAW,
                         # claimed in bot/services/storms.py: once per presser and showing
                         Action.RECOVER_ALL_MINE,
                         # launch_failed → waiting on the request row: once
                         Action.WAIT_FOR_STOCK}
    audit_names = [row.once.action for row in BUTTONS.values() if row.once is not None]
    assert len(audit_names) == len(set(audit_names))  # one claim namespace per button kind
