"""What Slack does with the app's answers that are not Web API calls.

- a POST to a response_url (Bolt's `respond()`): a reply, ephemeral unless `in_channel`, or a
  replacement / deletion of the message the payload came from; 5 uses within 30 minutes;
- the body of a slash command's ack: shown to the invoker the same way;
- the body of a view_submission ack: `response_action` errors / update / push / clear, or
  (empty) close the submitted view.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from devslack.methods import MethodStore, flag
from devslack.models import Message, ResponseTarget, SlackError

RESPONSE_URL_USES = 5
RESPONSE_URL_LIFETIME = timedelta(minutes=30)


@dataclass(frozen=True)
class Outcome:
    """What an answer changed: a message posted, edited or deleted, or a view."""

    message: Message | None = None
    edited: bool = False
    deleted: bool = False
    view: dict[str, Any] | None = None
    errors: dict[str, str] | None = None

    def to_response(self) -> dict[str, Any]:
        """The record of it in `ApiCall.response` (same keys as the Web API's answers)."""
        body: dict[str, Any] = {"ok": True}
        if self.message is not None:
            body.update(channel=self.message.channel, ts=self.message.ts)
        if self.edited:
            body["edited"] = True
        if self.deleted:
            body["deleted"] = True
        if self.view is not None:
            body["view"] = self.view
        if self.errors is not None:
            body["errors"] = self.errors
        return body


def respond(store: MethodStore, response_id: str, body: Any) -> Outcome:
    """A POST to a response_url."""
    target = store.response_targets.get(response_id)
    if target is None:
        raise SlackError("invalid_url", response_id)
    if store.clock.now() - target.issued > RESPONSE_URL_LIFETIME:
        raise SlackError("expired_url")
    if target.uses >= RESPONSE_URL_USES:
        raise SlackError("used_url")
    if not isinstance(body, dict):
        raise SlackError("invalid_payload", "a response_url takes a JSON object")
    target.uses += 1
    blocks = store.checked_blocks("response_url", body, need_text=False)
    if flag(body.get("delete_original")):
        original = _original(store, target)
        original.deleted = True
        return Outcome(message=original, deleted=True)
    if flag(body.get("replace_original")) and target.message_ts is not None:
        original = _original(store, target)
        # a replacement is a whole new message: blocks it omits are gone
        store.edit(original, text=str(body.get("text") or ""), blocks=blocks or [])
        return Outcome(message=original, edited=True)
    return Outcome(message=_reply(store, target, body, blocks, via="response_url"))


def command_ack(store: MethodStore, response_id: str, body: Any) -> Outcome:
    """The HTTP body a slash command was acked with, as the invoker sees it."""
    if body in ("", None):
        return Outcome()
    payload = body if isinstance(body, dict) else {"text": str(body)}
    blocks = store.checked_blocks("ack", payload, need_text=False)
    target = store.response_targets[response_id]
    return Outcome(message=_reply(store, target, payload, blocks, via="ack"))


def view_ack(store: MethodStore, view_id: str, body: Any) -> Outcome:
    """The HTTP body a view_submission was acked with, applied to the user's modal stack."""
    view = store.view(view_id)
    if body in ("", None):
        store.close_modal(view_id)
        return Outcome()
    if not isinstance(body, dict):
        raise store.refuse("ack", ["a view_submission ack is empty or a JSON object"], body)
    action = body.get("response_action")
    if action == "errors":
        errors = body.get("errors")
        inputs = {b.get("block_id") for b in view["blocks"] if b.get("type") == "input"}
        if not isinstance(errors, dict) or not errors:
            raise store.refuse("ack", ["response_action errors needs a non-empty `errors`"], body)
        strays = [f"errors names {k!r}: not an input block here" for k in errors if k not in inputs]
        if strays:
            raise store.refuse("ack", strays, body)
        return Outcome(view=view, errors={str(k): str(v) for k, v in errors.items()})
    if action == "update":
        new_view = store.checked_view("ack", body.get("view"), expected_type="modal")
        return Outcome(view=store.replace_view(view_id, new_view))
    if action == "push":
        new_view = store.checked_view("ack", body.get("view"), expected_type="modal")
        return Outcome(view=store.add_view(store.view_owner(view_id), new_view, push=True))
    if action == "clear":
        store.close_modal(view_id, everything=True)
        return Outcome()
    raise store.refuse("ack", [f"unknown response_action {action!r}"], body)


def _original(store: MethodStore, target: ResponseTarget) -> Message:
    if target.message_ts is None:
        raise SlackError("message_not_found", "this response_url has no original message")
    return store.message(target.channel_id, target.message_ts)


def _reply(
    store: MethodStore,
    target: ResponseTarget,
    body: dict[str, Any],
    blocks: list[dict[str, Any]] | None,
    *,
    via: str,
) -> Message:
    in_channel = body.get("response_type") == "in_channel"
    message = store.post(
        channel=target.channel_id,
        text=str(body.get("text") or ""),
        blocks=blocks or [],
        via=via,
        thread_ts=str(body["thread_ts"]) if body.get("thread_ts") else None,
        ephemeral_to=None if in_channel else target.user_id,
    )
    if target.message_ts is None:
        # a slash command has no original message; its first reply is what
        # `replace_original` / `delete_original` act on afterwards
        target.message_ts = message.ts
    return message
