"""Which requests from Slack are named as deliveries, and by what (bot/slack/once.py)."""

from bot.domain.claims import EVENT, PAYLOAD
from bot.slack.once import delivery_of

RETRY = {"x-slack-retry-num": ["1"]}
COMMAND = {"command": "/cluster", "text": "quote h100x8", "trigger_id": "13345224609.738474920"}


def test_an_event_is_named_by_its_event_id_and_always_a_repeat_when_seen():
    first = delivery_of({"type": "event_callback", "event_id": "Ev1"}, {})
    again = delivery_of({"type": "event_callback", "event_id": "Ev1", "x": 1}, RETRY)
    assert first is not None and again is not None
    assert first.kind == EVENT and first.key == again.key and first.repeats()


def test_a_command_is_named_by_its_payload_and_a_repeat_only_when_retried():
    first = delivery_of(dict(COMMAND), {})
    again = delivery_of(dict(reversed(COMMAND.items())), RETRY)  # key order doesn't matter
    other = delivery_of({**COMMAND, "trigger_id": "13345224609.738474921"}, RETRY)
    assert first is not None and again is not None and other is not None
    assert first.kind == PAYLOAD and first.key == again.key != other.key
    assert not first.repeats() and again.repeats()


def test_submissions_count_buttons_and_lookups_are_left_alone():
    assert delivery_of({"type": "view_submission", "view": {"id": "V1"}}, {}) is not None
    for body in ({"type": "block_actions"}, {"type": "block_suggestion"},
                 {"type": "url_verification"}, {"type": "event_callback"},
                 {"type": {"not": "a string"}}, {"type": "event_callback", "event_id": 7}):
        assert delivery_of(body, RETRY) is None
