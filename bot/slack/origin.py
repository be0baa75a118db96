"""What a signed Slack request is and where it comes from, read the same way for every kind.

`kind_of(body)`: a slash command, a button (block_actions), a view submission or close, a
shortcut, an event … (a small fixed set: a metrics label too).

`origin_of(body)`: every workspace and Enterprise organization the payload names, wherever Slack
puts them — a command's `team_id` / `enterprise_id`; an interactive payload's `team` (null in
org-wide installs), `user.team_id`, `enterprise`, `view.team_id` / `view.app_installed_team_id`;
an event's envelope `team_id` / `enterprise_id`, each of its `authorizations`, and the event's
own `user_team` / `team` / `user.team_id`. An id starting with `E` is an organization wherever it
appears (Slack puts one in `user_team` for Enterprise Grid users). Fuzzed values — a team that
is a number, a list — are simply not names. The rule that judges it is
bot/domain/installation.py; the gate that applies it to every request, bot/slack/gate.py.

`what_of(body)`: what was tried, in a few words. `actor_of(body)`: who acts, as the services
are told (their rules key on the user id).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bot.domain.installation import Origin, readable
from bot.domain.models import Actor

WHAT_MAX = 80
_KINDS = frozenset({"slash_command", "block_actions", "view_submission", "view_closed",
                    "event_callback", "block_suggestion", "shortcut", "message_action"})


def kind_of(body: dict[str, Any]) -> str:
    """What a Slack request is, from a small fixed set (a metrics label)."""
    kind = "slash_command" if "command" in body else str(body.get("type") or "other")
    return kind if kind in _KINDS else "other"


def what_of(body: dict[str, Any]) -> str:
    """What was tried, in a few words for the audit trail: `/cluster quote`, a button's
    action_id, a view's or shortcut's callback_id, an event's type."""
    kind = kind_of(body)
    if kind == "slash_command":
        words = str(body.get("text") or "").split()
        found = " ".join([str(body.get("command") or "?"), *words[:1]])
    elif kind in ("block_actions", "block_suggestion"):
        actions = body.get("actions")
        first = _dict(actions[0] if isinstance(actions, list) and actions else body)
        found = f"{kind}:{_text(first.get('action_id')) or '?'}"
    elif kind in ("view_submission", "view_closed"):
        found = f"{kind}:{_text(_dict(body.get('view')).get('callback_id')) or '?'}"
    elif kind == "event_callback":
        found = f"event:{_text(_dict(body.get('event')).get('type')) or '?'}"
    else:
        found = f"{kind}:{_text(body.get('callback_id')) or '?'}"
    return readable(found, WHAT_MAX)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _id(value: Any) -> str | None:
    """An id given as itself or as an object's `id` (`team`, `enterprise`)."""
    return _text(value) or _text(_dict(value).get("id"))


def _named(body: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    """(what, id) for every workspace ("team") or organization ("enterprise") the body names."""
    if kind_of(body) == "event_callback":
        event, given = _dict(body.get("event")), body.get("authorizations")
        authorizations = given if isinstance(given, list) else []
        for place in (body, *map(_dict, authorizations)):
            yield "team", _text(place.get("team_id"))
            yield "enterprise", _text(place.get("enterprise_id"))
        for key in ("user_team", "team", "source_team"):
            yield "team", _text(event.get(key))
        yield "team", _text(_dict(event.get("user")).get("team_id"))
        return
    # A slash command's form fields, or an interactive payload's objects.
    team, user, view = _dict(body.get("team")), _dict(body.get("user")), _dict(body.get("view"))
    yield "team", _text(body.get("team_id"))
    yield "team", _id(body.get("team"))
    yield "team", _text(user.get("team_id"))
    yield "team", _text(view.get("team_id"))
    yield "team", _text(view.get("app_installed_team_id"))
    yield "enterprise", _text(body.get("enterprise_id"))
    yield "enterprise", _id(body.get("enterprise"))
    yield "enterprise", _text(team.get("enterprise_id"))
    yield "enterprise", _text(user.get("enterprise_id"))


def origin_of(body: dict[str, Any]) -> Origin:
    teams: set[str] = set()
    enterprises: set[str] = set()
    for what, found in _named(body):
        if found is not None:
            (enterprises if what == "enterprise" or found.startswith("E") else teams).add(found)
    return Origin(team_ids=frozenset(teams), enterprise_ids=frozenset(enterprises))


def user_of(body: dict[str, Any]) -> str | None:
    """The Slack user acting: a command's `user_id`, a payload's `user.id`, an event's `user`."""
    event = _dict(body.get("event"))
    return _text(body.get("user_id")) or _id(body.get("user")) or _id(event.get("user"))


def actor_of(body: dict[str, Any]) -> Actor:
    """The acting user and their own workspace (`user.team_id` first: in a shared channel the
    payload's `team` is the channel's side, not necessarily the person's)."""
    user = _dict(body.get("user"))
    team = _text(user.get("team_id")) or _id(body.get("team")) or _text(body.get("team_id"))
    enterprise = _id(body.get("enterprise")) or _text(body.get("enterprise_id"))
    return Actor(user_id=user_of(body) or "?", team_id=team, enterprise_id=enterprise)
