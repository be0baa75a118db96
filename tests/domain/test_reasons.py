"""Provider codes in words: why a cluster ended, and errors, never as raw codes."""

import pytest

from bot.domain.reasons import BY_SPEND_POLICY, error_words, why_terminated


@pytest.mark.parametrize(("reason", "by", "says"), [
    ("requested", "U0ALICE", "requested by <@U0ALICE>"),
    ("requested", BY_SPEND_POLICY, "its approved spend envelope ran out"),
    ("payment_grace_expired", None, "the payment grace ended on an unpaid hour"),
    ("requested", None, "terminated outside the bot"),
    (None, None, "terminated outside the bot"),
    ("not_found_at_provider", None, "it is gone at AI Reserve"),
    ("maintenance_retired", None, "AI Reserve ended it: maintenance retired"),
])
def test_why_terminated_in_words(reason, by, says):
    text = why_terminated(reason=reason, requested_by=by)
    assert says in text
    assert "_" not in text.replace(BY_SPEND_POLICY, "")  # no raw code


def test_error_words_maps_codes_and_keeps_sentences():
    assert error_words("recovery_exhausted") == "every recovery attempt of this episode is spent"
    assert error_words("some_new_code") == "some new code"
    assert error_words("At the new price the spend policy refuses it: x_y.") == \
        "At the new price the spend policy refuses it: x_y."
    assert error_words(None) is None
