"""SIGHUP: read the policy file again, and use it only if it is sound; and the bot token's file.

A sound file replaces the policies the services read (`People.policies`: the top level and
each installation's) at once; the next quote, approval card and sweep use them — a new approvals
channel gets the next card (a card already posted is edited where it is). A bad file changes
nothing: each problem is logged with its line, and the admins (else the approvers) of every
policy in force are told in a DM through the notifier's outbox (`tell`: said once per distinct
bad file).

The bot token, when it comes from a file (SLACK_BOT_TOKEN_FILE, or SECRETS_DIR/SLACK_BOT_TOKEN:
how Compose secrets and Kubernetes Secret volumes hand it over), is read again on SIGHUP and
whenever the file changes (`watch_token_file`, every few seconds: a Secret volume's update needs
no signal): a new, well-formed token replaces the client's at once, and since Slack's refusal of
the old one says nothing of it, every call — and every post that waited — goes out with it
(bot/slack/tokens.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from hashlib import sha256
from pathlib import Path

from bot.app.process import Runtime
from bot.config.policy_file import PolicyError, load_policies
from bot.domain.places import Policies
from bot.slack.tokens import TokenGate, fingerprint

log = logging.getLogger(__name__)

TOKEN_WATCH_SECONDS = 5.0


async def reload_policy(rt: Runtime) -> list[str]:
    """Reload POLICY_FILE; returns the problems that kept the old policy (empty: reloaded)."""
    path = rt.settings.policy_file
    if path is None:
        log.info("SIGHUP: no POLICY_FILE is set; the policy comes from APPROVERS and "
                 "APPROVALS_CHANNEL, read at start")
        return []
    people = rt.services.people
    try:
        new = load_policies(path).with_channel(rt.settings.approvals_channel)
    except PolicyError as exc:
        for problem in exc.problems:
            log.error("policy reload refused, the old policy stays: %s", problem)
        await _tell_admins(rt, people.policies, exc.problems)
        return exc.problems
    people.policies = new
    log.info("policy reloaded from %s (%d installation%s with a policy of their own)", path,
             len(new.places), "" if len(new.places) == 1 else "s")
    return []


async def _tell_admins(rt: Runtime, policies: Policies, problems: list[str]) -> None:
    admins = sorted({a for p in policies.all() for a in (p.admin_ids or p.approver_ids)})
    text = ("The policy file was changed but not used: it has problems, so the old policy "
            "stays in force.\n" + "\n".join(f"• `{p}`" for p in problems[:20]))
    key = "policy-reload/" + sha256("\n".join(problems).encode()).hexdigest()[:16]
    for admin in admins:
        try:
            await rt.notifier.tell(admin, text, key=key)
        except Exception:  # the outbox retries refused posts; anything else: logged, not fatal
            log.warning("could not tell %s about the refused policy file", admin, exc_info=True)


async def reload_token(rt: Runtime) -> bool:
    """Read the bot token from its file again; True when a new one is in use now."""
    path = rt.settings.slack_bot_token_path
    if path is None or not isinstance(rt.slack, TokenGate):
        return False
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        log.error("bot token file %s can't be read (%s): the token in use stays", path,
                  type(exc).__name__)
        return False
    if token == rt.slack.token:
        return False
    if not token.startswith("xoxb-"):  # never echoed: a secret, even pasted in the wrong place
        log.error("bot token file %s holds no bot token (xoxb-…): the token in use stays", path)
        return False
    rt.slack.token = token
    if rt.slack.tokens is not None:
        rt.slack.tokens.forget()  # what Slack said of the old token says nothing of this one
    log.warning("bot token reloaded from %s (now %s): calls to Slack resume with it", path,
                fingerprint(token))
    return True


def _stamp(path: Path) -> tuple[float, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_mtime, found.st_size


async def watch_token_file(rt: Runtime, *,
                           sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
    """Reload the bot token whenever its file changes (a Secret volume swaps it in place)."""
    path = rt.settings.slack_bot_token_path
    if path is None:
        return
    seen = _stamp(path)
    while True:
        await sleep(TOKEN_WATCH_SECONDS)
        now = _stamp(path)
        if now != seen:
            seen = now
            try:
                await reload_token(rt)
            except Exception:  # the watch goes on; the next change is read again
                log.exception("reloading the bot token failed")
