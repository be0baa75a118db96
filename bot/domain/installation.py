"""Whose requests the bot takes: those of the installation its token belongs to, and no one else's.

Pure. `Installed` is where the app is installed (auth.test, read at start); `Origin` is every
workspace and Enterprise organization a signed Slack payload names (bot/slack/origin.py reads
them out of each kind of payload); `outsider(installed, origin)` says why a request is not the
installation's — in words for the person, naming the rule — or None when it is.

The rule, for a workspace install: the payload names at least one workspace, and every workspace
and organization it names is the installation's. "Every" matters: a Slack Connect guest clicking
in a shared channel arrives with our `team.id` but their own `user.team_id`; a payload that names
another workspace anywhere is refused, whatever else it names. For an org-wide install (an
Enterprise Grid organization): at least one organization, and only ours; and, where the
installation knows its organization's workspaces (installed through OAuth: the ones the org's
admins gave the app to), every workspace named is one of them — a Slack Connect guest from a
workspace outside the org, clicking in a channel of ours, names their own.

Unknown is not consent: until auth.test has answered, and for a payload that names no workspace
at all, the answer is no — nothing that spends money goes through on a guess.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from bot.domain.models import Frozen

ID_SHOWN = 24  # characters of a named id shown (a fuzzed one may be thousands long)
IDS_SHOWN = 3


class Installed(Frozen):
    """Where the app is installed (auth.test at start): one workspace, or a whole Enterprise
    organization (an org-wide install serves every workspace of that enterprise)."""

    team_id: str | None = None
    enterprise_id: str | None = None
    org_wide: bool = False
    # org-wide: the organization's workspaces the app serves (None: not known, every one).
    workspaces: frozenset[str] | None = None

    @property
    def known_as(self) -> str | None:
        """The id that names the installation (its org for an org-wide install); None: not
        known yet."""
        return self.enterprise_id if self.org_wide else self.team_id


class Installation(Frozen):
    """One install of the app through the OAuth flow (SLACK_CLIENT_ID set): a workspace, or a
    whole Enterprise organization (`org_wide`). Its tokens are sealed at rest (storage). A
    stopped installation (`tokens_revoked`, `app_uninstalled`) keeps its row and its data, and
    is called no more."""

    enterprise_id: str | None = None
    team_id: str | None = None
    org_wide: bool = False
    app_id: str | None = None
    name: str = ""  # the workspace's (or organization's) name, for people and log lines
    bot_token: str
    bot_id: str | None = None
    bot_user_id: str | None = None
    bot_scopes: str = ""  # comma-separated, as Slack says them
    bot_refresh_token: str | None = None  # rotating tokens only
    bot_token_expires_at: datetime | None = None
    installer_id: str | None = None
    installed_at: datetime
    stopped_at: datetime | None = None
    stopped_why: str | None = None
    # A rotating token whose refresh fails: since when, and why (Slack's error); None once
    # one works again.
    refresh_failing_since: datetime | None = None
    refresh_failure: str | None = None
    # org-wide: the workspaces of the organization the app was given to (auth.teams.list,
    # team_access_granted / _revoked); a request from any other is not this installation's.
    workspaces: frozenset[str] = frozenset()

    @property
    def key(self) -> str:
        """What names it: its organization's id for an org-wide install, else its workspace's
        (Slack's ids are unique across Slack)."""
        key = self.enterprise_id if self.org_wide else self.team_id
        assert key, "an installation names its workspace or, org-wide, its organization"
        return key

    @property
    def installed(self) -> Installed:
        """Where it is installed: what every request it serves is judged against."""
        return Installed(team_id=self.team_id, enterprise_id=self.enterprise_id,
                         org_wide=self.org_wide,
                         workspaces=self.workspaces if self.org_wide else None)


def installation_key(*, enterprise_id: str | None, team_id: str | None,
                     org_wide: bool) -> str | None:
    """The key of the installation a request of (`enterprise_id`, `team_id`) is looked up by
    first: the organization's for an org-wide request, else the workspace's."""
    return enterprise_id if org_wide else team_id


class Origin(Frozen):
    """What a signed payload says about where it comes from: every workspace id (`T…`) and
    every Enterprise organization id (`E…`) it names, for its user or for itself."""

    team_ids: frozenset[str] = frozenset()
    enterprise_ids: frozenset[str] = frozenset()

    def named(self) -> str:
        """The ids, for a person or a log line: `T0A, T0B` (sorted)."""
        return shown(self.team_ids | self.enterprise_ids) or "none"


def readable(text: str, limit: int) -> str:
    """`text` safe to show, log and store: printable, valid UTF-8, at most `limit` characters.
    (A payload's ids are whatever its sender wrote: a lone surrogate, a control character.)"""
    safe = "".join(c if c.isprintable() else "?" for c in
                   text.encode("utf-8", "backslashreplace").decode("utf-8"))
    return safe if len(safe) <= limit else safe[:limit - 1] + "…"


def shown(ids: Collection[str]) -> str:
    """A few ids, readable: `T0A, T0B`, `… and 2 more`."""
    listed = ", ".join(readable(i, ID_SHOWN) for i in sorted(ids)[:IDS_SHOWN])
    return listed + (f" and {len(ids) - IDS_SHOWN} more" if len(ids) > IDS_SHOWN else "")


UNKNOWN = ("I can't tell yet which workspace I'm installed in (Slack hasn't answered me since I "
           "started), so I'm taking no requests; nothing was done. Try again in a minute.")
UNNAMED = ("This request doesn't say which workspace it comes from, so I can't take it; nothing "
           "was done. Use the bot from the workspace it is installed in.")


def outsider(installed: Installed | None, origin: Origin) -> str | None:
    """None when the request is the installation's; else why not, for the person asking."""
    if installed is None or installed.known_as is None:
        return UNKNOWN
    if installed.org_wide:
        if not origin.enterprise_ids:
            return UNNAMED
        foreign = origin.enterprise_ids - {installed.enterprise_id}
        if installed.workspaces is not None:
            foreign |= origin.team_ids - installed.workspaces
            if foreign:
                return ("This bot only takes requests from the workspaces of the organization "
                        f"it is installed in; this one names another ({shown(foreign)}), so "
                        "nothing was done. Ask an admin of your organization to give the app "
                        "to your workspace, or ask someone in one it serves.")
    else:
        if not origin.team_ids:
            return UNNAMED
        foreign = (origin.team_ids - {installed.team_id}) \
            | (origin.enterprise_ids - {installed.enterprise_id})
    if not foreign:
        return None
    return ("This bot only takes requests from the workspace it is installed in; this one comes "
            f"from another ({shown(foreign)}), so nothing was done. Ask someone in "
            "the workspace that runs the bot.")
