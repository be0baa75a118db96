"""The Web API methods FakeSlack answers: one function each, parsed args in, Slack's JSON out.

Each function returns the success body without `ok` (the server adds it) or raises
`SlackError`. Every `blocks` argument and every view goes through `blockkit`; a refusal is
also recorded in `store.violations` so a test can assert there were none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from devslack.blockkit import MESSAGE_BLOCK_LIMIT, block_problems, view_problems
from devslack.models import Message, SlackError, Violation
from devslack.store import SlackStore

Args = Mapping[str, Any]
SCHEDULE_HORIZON = timedelta(days=120)


class MethodStore(SlackStore):
    """The store plus the checks and chores the Web API methods share."""

    # What a person can break around the bot: archived channels, channels the bot was removed
    # from, deactivated users. Slack's own error codes answer posts to them (`unreachable`).
    archived: set[str]
    removed_from: set[str]
    deactivated: set[str]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.archived, self.removed_from, self.deactivated = set(), set(), set()

    def unreachable(self, method: str, args: dict[str, Any]) -> str | None:
        """Slack's answer to a post into an archived channel, a channel the bot was removed
        from, or to a deactivated person (None: it goes through)."""
        if method == "conversations.open":
            users = str(args.get("users") or "").split(",")
            return "user_disabled" if any(u.strip() in self.deactivated for u in users) else None
        if method not in ("chat.postMessage", "chat.update", "chat.postEphemeral",
                          "chat.scheduleMessage"):
            return None
        channel = str(args.get("channel") or "")
        if channel in self.archived:
            return "is_archived"
        if channel in self.removed_from:
            return "not_in_channel"
        if self.dm_user(channel) in self.deactivated or channel in self.deactivated:
            return "user_disabled"
        return None

    def refuse(self, method: str, problems: list[str], payload: Any) -> SlackError:
        """Record a violation and build the `invalid_blocks` error to raise."""
        self.violations.append(Violation(method, tuple(problems), payload, self.clock.now()))
        return SlackError("invalid_blocks", "; ".join(problems))

    def checked_blocks(
        self, method: str, args: Args, *, need_text: bool
    ) -> list[dict[str, Any]] | None:
        """`args["blocks"]` if Slack would accept it (None when absent)."""
        blocks = args.get("blocks")
        if blocks is None:
            return None
        problems = block_problems(blocks, limit=MESSAGE_BLOCK_LIMIT)
        if need_text and blocks and not str(args.get("text") or "").strip():
            problems.append("blocks were sent without a top-level `text` fallback")
        if problems:
            raise self.refuse(method, problems, blocks)
        return list(blocks)

    def checked_view(self, method: str, view: Any, *, expected_type: str) -> dict[str, Any]:
        problems = view_problems(view, expected_type=expected_type)
        if problems:
            raise self.refuse(method, problems, view)
        return dict(view)

    def deliver_scheduled(self) -> list[Message]:
        """Post every scheduled message whose time has come (by the store's clock)."""
        now = self.clock.now()
        due = sorted((at, sid) for sid, (at, _) in self.scheduled.items() if at <= now)
        posted = []
        for _, scheduled_id in due:
            _, message = self.scheduled.pop(scheduled_id)
            posted.append(self.post(via="chat.scheduleMessage", **message))
        return posted

    def message_body(self, message: Message) -> dict[str, Any]:
        return message.to_payload(team_id=self.team_id, bot_id=self.bot_id, app_id=self.app_id)


def flag(value: object) -> bool:
    """A boolean argument, however it arrived (JSON true, form "true"/"1")."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes")
    return bool(value)


def required(args: Args, name: str) -> str:
    value = args.get(name)
    if value in (None, ""):
        raise SlackError("invalid_arguments", f"missing required argument {name!r}")
    return str(value)


def _extra(args: Args) -> dict[str, Any]:
    return {k: args[k] for k in ("attachments", "metadata", "unfurl_links") if k in args}


# -- chat.* ---------------------------------------------------------------------------------


def _post(store: MethodStore, args: Args, via: str, *, ephemeral: bool = False) -> Message:
    """chat.postMessage and chat.postEphemeral: checked in Slack's order (channel, user,
    blocks, text), then posted."""
    channel = store.resolve_channel(required(args, "channel"))
    user = store.user(required(args, "user")) if ephemeral else None
    blocks = store.checked_blocks(via, args, need_text=True)
    text = str(args.get("text") or "")
    if not (text or blocks or args.get("attachments")):
        raise SlackError("no_text")
    return store.post(
        channel=channel,
        text=text,
        blocks=blocks or [],
        via=via,
        thread_ts=str(args["thread_ts"]) if args.get("thread_ts") else None,
        reply_broadcast=False if ephemeral else flag(args.get("reply_broadcast")),
        ephemeral_to=None if user is None else user.id,
        extra=_extra(args),
    )


def chat_post_message(store: MethodStore, args: Args) -> dict[str, Any]:
    message = _post(store, args, "chat.postMessage")
    return {"channel": message.channel, "ts": message.ts,
            "message": store.message_body(message)}


def chat_update(store: MethodStore, args: Args) -> dict[str, Any]:
    channel = store.resolve_channel(required(args, "channel"))
    message = store.message(channel, required(args, "ts"))
    if message.ephemeral_to is not None:
        raise SlackError("message_not_found", "ephemeral messages cannot be updated")
    blocks = store.checked_blocks("chat.update", args, need_text=True)
    text = args.get("text")
    if text is None and blocks is None and not args.get("attachments"):
        raise SlackError("no_text")
    # Slack keeps the old blocks when `blocks` is omitted; [] removes them.
    store.edit(message, text=None if text is None else str(text), blocks=blocks)
    return {
        "channel": channel,
        "ts": message.ts,
        "text": message.text,
        "message": store.message_body(message),
    }


def chat_delete(store: MethodStore, args: Args) -> dict[str, Any]:
    channel = store.resolve_channel(required(args, "channel"))
    message = store.message(channel, required(args, "ts"))
    message.deleted = True
    return {"channel": channel, "ts": message.ts}


def chat_post_ephemeral(store: MethodStore, args: Args) -> dict[str, Any]:
    return {"message_ts": _post(store, args, "chat.postEphemeral", ephemeral=True).ts}


def chat_schedule_message(store: MethodStore, args: Args) -> dict[str, Any]:
    channel = store.resolve_channel(required(args, "channel"))
    try:
        post_at = int(required(args, "post_at"))
    except ValueError as exc:
        raise SlackError("invalid_time") from exc
    now = store.clock.now()
    when = datetime.fromtimestamp(post_at, tz=now.tzinfo)
    if when <= now:
        raise SlackError("time_in_past")
    if when > now + SCHEDULE_HORIZON:
        raise SlackError("time_too_far")
    blocks = store.checked_blocks("chat.scheduleMessage", args, need_text=True)
    text = str(args.get("text") or "")
    scheduled_id = f"Q{len(store.scheduled) + 1:04d}{post_at}"
    store.scheduled[scheduled_id] = (
        when,
        {"channel": channel, "text": text, "blocks": blocks or [], "extra": _extra(args)},
    )
    return {
        "channel": channel,
        "scheduled_message_id": scheduled_id,
        "post_at": post_at,
        "message": {
            "type": "message",
            "text": text,
            "blocks": blocks or [],
            "bot_id": store.bot_id,
        },
    }


def chat_delete_scheduled_message(store: MethodStore, args: Args) -> dict[str, Any]:
    if store.scheduled.pop(required(args, "scheduled_message_id"), None) is None:
        raise SlackError("invalid_scheduled_message_id")
    return {}


# -- conversations.*, users.*, auth.* -------------------------------------------------------


def conversations_open(store: MethodStore, args: Args) -> dict[str, Any]:
    if args.get("channel"):
        return {"channel": {"id": store.resolve_channel(str(args["channel"]))}}
    users = [u for u in required(args, "users").split(",") if u.strip()]
    if len(users) != 1:
        raise SlackError("not_supported", "devslack opens one-to-one DMs only")
    return {"channel": {"id": store.dm_channel(users[0].strip())}}


def conversations_info(store: MethodStore, args: Args) -> dict[str, Any]:
    channel = store.resolve_channel(required(args, "channel"))
    dm_user = store.dm_user(channel)
    info: dict[str, Any] = {
        "id": channel,
        "name": store.channel_name(channel),
        "is_channel": dm_user is None,
        "is_im": dm_user is not None,
        "is_private": dm_user is not None,
        "is_member": channel not in store.removed_from,
        "is_archived": channel in store.archived,
    }
    if dm_user is not None:
        info["user"] = dm_user
    return {"channel": info}


def conversations_list(store: MethodStore, args: Args) -> dict[str, Any]:
    """The workspace's channels (public ones: devslack has no private channels), one page."""
    channels = [{"id": channel_id, "name": name, "is_channel": True, "is_private": False,
                 "is_archived": False} for channel_id, name in store.channels.items()]
    return {"channels": channels, "response_metadata": {"next_cursor": ""}}


def _history(store: MethodStore, args: Args, found: list[Message]) -> dict[str, Any]:
    """Messages newest first, since `oldest`, up to `limit`; metadata when asked for."""
    oldest = float(args.get("oldest") or 0)
    limit = int(args.get("limit") or 100)
    metadata = flag(args.get("include_all_metadata"))
    picked = [m for m in reversed(found) if float(m.ts) >= oldest][:limit]
    messages = []
    for message in picked:
        body = store.message_body(message)
        if metadata and isinstance(message.extra.get("metadata"), dict):
            body["metadata"] = message.extra["metadata"]
        messages.append(body)
    return {"messages": messages, "has_more": False,
            "response_metadata": {"next_cursor": ""}}


def conversations_history(store: MethodStore, args: Args) -> dict[str, Any]:
    channel = store.resolve_channel(required(args, "channel"))
    if channel in store.removed_from:
        raise SlackError("not_in_channel")
    return _history(store, args, store.messages(channel))


def conversations_replies(store: MethodStore, args: Args) -> dict[str, Any]:
    channel = store.resolve_channel(required(args, "channel"))
    if channel in store.removed_from:
        raise SlackError("not_in_channel")
    return _history(store, args, store.thread(channel, required(args, "ts")))


def users_info(store: MethodStore, args: Args) -> dict[str, Any]:
    user = store.user(required(args, "user"))
    wire = user.to_wire(team_id=store.team_id, now=store.clock.now())
    return {"user": {**wire, "deleted": True} if user.id in store.deactivated else wire}


def users_lookup_by_email(store: MethodStore, args: Args) -> dict[str, Any]:
    email = required(args, "email").lower()
    for user in store.users.values():
        if f"{user.name}@example.com" == email:
            return {"user": user.to_wire(team_id=store.team_id, now=store.clock.now())}
    raise SlackError("users_not_found")


def auth_test(store: MethodStore, args: Args) -> dict[str, Any]:
    return {
        "url": f"https://{store.team_domain}.slack.com/",
        "team": store.team_domain,
        "user": store.bot_name,
        "team_id": store.team_id,
        "user_id": store.bot_user_id,
        "bot_id": store.bot_id,
        "is_enterprise_install": False,
    }


def api_test(store: MethodStore, args: Args) -> dict[str, Any]:
    return {"args": dict(args)}


def usergroups_users_list(store: MethodStore, args: Args) -> dict[str, Any]:
    group = required(args, "usergroup")
    if group not in store.usergroups:
        raise SlackError("no_such_subteam", group)
    return {"users": list(store.usergroups[group])}


# -- views.* --------------------------------------------------------------------------------


def views_open(store: MethodStore, args: Args) -> dict[str, Any]:
    view = store.checked_view("views.open", args.get("view"), expected_type="modal")
    user_id = store.redeem_trigger(required(args, "trigger_id"))
    return {"view": store.add_view(user_id, view)}


def views_push(store: MethodStore, args: Args) -> dict[str, Any]:
    view = store.checked_view("views.push", args.get("view"), expected_type="modal")
    user_id = store.redeem_trigger(required(args, "trigger_id"))
    return {"view": store.add_view(user_id, view, push=True)}


def views_update(store: MethodStore, args: Args) -> dict[str, Any]:
    current = store.find_view(view_id=args.get("view_id"), external_id=args.get("external_id"))
    view = store.checked_view("views.update", args.get("view"), expected_type=current["type"])
    return {"view": store.replace_view(current["id"], view, hash=args.get("hash"))}


def views_publish(store: MethodStore, args: Args) -> dict[str, Any]:
    user = store.user(required(args, "user_id"))
    view = store.checked_view("views.publish", args.get("view"), expected_type="home")
    return {"view": store.publish_home(user.id, view, hash=args.get("hash"))}


Method = Callable[[MethodStore, Args], dict[str, Any]]

METHODS: Mapping[str, Method] = {
    "api.test": api_test,
    "auth.test": auth_test,
    "chat.postMessage": chat_post_message,
    "chat.update": chat_update,
    "chat.delete": chat_delete,
    "chat.postEphemeral": chat_post_ephemeral,
    "chat.scheduleMessage": chat_schedule_message,
    "chat.deleteScheduledMessage": chat_delete_scheduled_message,
    "conversations.open": conversations_open,
    "conversations.info": conversations_info,
    "conversations.list": conversations_list,
    "conversations.history": conversations_history,
    "conversations.replies": conversations_replies,
    "users.info": users_info,
    "users.lookupByEmail": users_lookup_by_email,
    "usergroups.users.list": usergroups_users_list,
    "views.open": views_open,
    "views.push": views_push,
    "views.update": views_update,
    "views.publish": views_publish,
}
