"""`/cluster template save|list|delete`: the words after `template`, parsed (pure).

The name itself (empty, too long, badly formed) is judged by bot/domain/templates.py, so the
command and the service refuse the same names with the same words.
"""

from __future__ import annotations

import re

from bot.domain import templates
from bot.domain.commands import (
    USAGE,
    TemplateDeleteCommand,
    TemplateListCommand,
    TemplateSaveCommand,
)
from bot.domain.errors import InvalidCommand

_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_TEAM = re.compile(r"^team=(?P<team>[A-Za-z0-9][A-Za-z0-9 _.-]{0,63})$", re.IGNORECASE)

TemplateCommand = TemplateSaveCommand | TemplateListCommand | TemplateDeleteCommand


def _fail(message: str, bad_part: str) -> InvalidCommand:
    return InvalidCommand(message, bad_part=bad_part, usage=USAGE["template"])


def _name(token: str) -> str:
    problem = templates.name_problem(token)
    if problem is not None:
        raise _fail(problem, token[:templates.MAX_NAME] or "name")
    return token


def parse_template(args: list[str]) -> TemplateCommand:
    verb = args[0].lower() if args else ""
    rest = args[1:]
    if verb == "list":
        if rest:
            raise _fail(f"`/cluster template list` takes nothing more; I don't understand "
                        f"`{rest[0][:40]}`.", rest[0])
        return TemplateListCommand()
    if verb == "delete":
        if len(rest) > 1:
            raise _fail(f"Name one template to delete; I don't understand `{rest[1][:40]}`.",
                        rest[1])
        return TemplateDeleteCommand(_name(rest[0] if rest else ""))
    if verb == "save":
        name = _name(rest[0] if rest else "")
        if len(rest) < 2:
            raise _fail(f"Which cluster should `{name}` be saved from? e.g. "
                        f"`/cluster template save {name} clu_9xQe1`.", "cluster")
        cluster_id = rest[1]
        if not _ID.match(cluster_id):
            raise _fail(f"`{cluster_id[:40]}` is not a cluster id (like `clu_9xQe1`).",
                        cluster_id)
        team: str | None = None
        for token in rest[2:]:
            match = _TEAM.match(token)
            if token.lower() in ("shared", "--team") and team is None:
                team = ""
            elif match and team is None:
                team = match["team"]
            else:
                raise _fail(f"I don't understand `{token[:40]}`; add `shared` (your team) or "
                            "`team=<name>`, once.", token)
        return TemplateSaveCommand(name=name, cluster_id=cluster_id, team=team)
    raise _fail(f"`/cluster template` does `save`, `list` and `delete`; I don't understand "
                f"`{verb[:20]}`.", verb[:20] or "template")
