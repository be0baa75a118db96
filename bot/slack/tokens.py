"""A refused bot token is the app's own failure, not its targets': stop calling, probe, say so once.

Slack answers `invalid_auth`, `account_inactive`, `token_revoked`, `token_expired` or
`not_authed` when the *token* is no good — every channel and person is as reachable as before.
So such an answer never marks a target undeliverable (bot/slack/outbox.py) and never marks a
notice delivered. Instead `TokenGate`, the outermost layer of the bot's Web API client, records
the token refused (`Tokens`, one state per token: with OAuth, per installation) and from then on
refuses every call with it locally (`TokenRefused`, a SlackApiError: nothing is sent, every
post stays queued), except one probe at a time, on a back-off (30 s doubling to 10 min, judged
on the host's clock): the next call when one is due, or the delivery sweep's `auth.test`
(`usable`). The first accepted call says the token works again, and what waited goes out once,
by the outbox's claims.

Each change of state is said once: an ERROR line (a WARNING when accepted again), the gauge
`clusterbot_slack_tokens_refused` and the counter `clusterbot_slack_token_changes_total`
(bot/observability/metrics.py; alert ClusterBotSlackTokenRefused), and a note in /readyz's body
(`problem`). A new token (SIGHUP, or its file changing: bot/app/reload.py) is a new state: its
first call goes through at once; so does an installation's refreshed rotating token, and the
refusal of the one it replaced ends (`retire`: otherwise the gauge and the alert would stay
on for a token no longer used). With OAuth, a refused token stops only its installation's
calls: the others carry their own tokens, judged each on its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from hashlib import sha256
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.slack.answers import Answer, error_code, slack_said

log = logging.getLogger(__name__)

TOKEN_ERRORS = frozenset({"invalid_auth", "account_inactive", "token_revoked", "token_expired",
                          "not_authed"})
FIRST_PROBE_SECONDS = 30.0
MAX_PROBE_SECONDS = 600.0
PROBE = "auth.test"


class TokenRefused(SlackApiError):
    """A call not sent: Slack refuses this token (`code`) and no probe is due yet."""

    def __init__(self, code: str) -> None:
        super().__init__(  # type: ignore[no-untyped-call]
            f"Slack refuses the bot token ({code}): not called", Answer(code, None))
        self.code = code


@dataclass
class _State:
    code: str
    since: float
    wait: float = FIRST_PROBE_SECONDS
    next_probe: float = 0.0
    probing: bool = False


def fingerprint(token: str | None) -> str:
    """A token's name in logs and state: never the token itself."""
    return sha256((token or "").encode()).hexdigest()[:10]


class Tokens:
    """Which tokens Slack refuses now, and when each is probed next (`now`: host seconds)."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._refused: dict[str, _State] = {}
        self.changes: Callable[[str], None] = lambda state: None  # metrics: "refused"/"accepted"

    @property
    def refused_count(self) -> int:
        return len(self._refused)

    def refused(self, key: str) -> str | None:
        state = self._refused.get(key)
        return None if state is None else state.code

    def refuse(self, key: str, code: str) -> None:
        """Slack refused token `key` (`code`), in an answer or an event."""
        now = self._now()
        state = self._refused.get(key)
        if state is None:
            self._refused[key] = _State(code, since=now, next_probe=now + FIRST_PROBE_SECONDS)
            log.error("Slack refuses the bot token %s (%s): Slack calls stopped, every post kept "
                      "queued; probing every %.0f s or more. Give the bot a valid token "
                      "(its file, then SIGHUP) or reinstall the app", key, code,
                      FIRST_PROBE_SECONDS)
            self.changes("refused")
            return
        state.code, state.probing = code, False
        state.wait = min(state.wait * 2, MAX_PROBE_SECONDS)
        state.next_probe = now + state.wait

    def accepted(self, key: str) -> None:
        state = self._refused.pop(key, None)
        if state is not None:
            log.warning("Slack accepts the bot token %s again (refused %s for %.0f s): "
                        "posting what waited", key, state.code, self._now() - state.since)
            self.changes("accepted")

    def retire(self, key: str) -> None:
        """Token `key` was replaced by a new one (an installation's rotating token refreshed):
        what Slack said of it says nothing of the new one, which is judged on its own."""
        state = self._refused.pop(key, None)
        if state is not None:
            log.warning("the bot token %s Slack refused (%s) is replaced by a new one: calls "
                        "go out with the new token", key, state.code)
            self.changes("replaced")

    def forget(self) -> None:
        """A new token was loaded: what was refused before says nothing about it."""
        for key in list(self._refused):
            self.accepted(key)

    def admit(self, key: str) -> None:
        """Raise `TokenRefused` unless `key` is accepted or its probe is due (then this call is
        the probe: one at a time)."""
        state = self._refused.get(key)
        if state is None:
            return
        if state.probing or self._now() < state.next_probe:
            raise TokenRefused(state.code)
        state.probing = True

    def settle(self, key: str) -> None:
        """A call with `key` ended without a token error: if it was a probe, the token works."""
        if key in self._refused:
            self.accepted(key)

    def unsure(self, key: str) -> None:
        """A probe got no answer: the next one after the same wait."""
        state = self._refused.get(key)
        if state is not None and state.probing:
            state.probing = False
            state.next_probe = self._now() + state.wait

    def problem(self) -> str | None:
        """What /readyz's body says while a token is refused."""
        if not self._refused:
            return None
        now = self._now()
        worst = min(self._refused.values(), key=lambda s: s.since)
        return (f"slack token: refused by Slack ({worst.code}) for {now - worst.since:.0f} s "
                f"({len(self._refused)} token(s)); Slack calls stopped, posts kept queued")


def _token(client: AsyncWebClient, kwargs: dict[str, Any]) -> str | None:
    headers = kwargs.get("headers") or {}
    bearer = str(headers.get("Authorization") or "")
    if bearer.startswith("Bearer "):
        return bearer.removeprefix("Bearer ")
    return client.token


class TokenGate(AsyncWebClient):
    """The outermost layer: calls with a refused token are refused here, unsent."""

    tokens: Tokens | None = None

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        tokens = self.tokens
        if tokens is None:
            return await super().api_call(api_method, **kwargs)
        key = fingerprint(_token(self, kwargs))
        tokens.admit(key)
        try:
            response = await super().api_call(api_method, **kwargs)
        except BaseException as exc:
            code = error_code(exc)
            if code in TOKEN_ERRORS:
                assert code is not None
                tokens.refuse(key, code)
            elif slack_said(exc):  # Slack read the token and refused something else
                tokens.settle(key)
            else:  # no answer: nothing learnt about the token
                tokens.unsure(key)
            raise
        tokens.settle(key)
        return response

    async def usable(self) -> bool:
        """False while this client's token is refused; when a probe is due, `auth.test` is it."""
        tokens = self.tokens
        key = fingerprint(self.token)
        if tokens is None or self.token is None or tokens.refused(key) is None:
            return True
        try:
            await self.api_call(PROBE)
        except SlackApiError:
            return tokens.refused(key) is None
        return True


async def usable(client: AsyncWebClient) -> bool:
    """False while `client`'s token is refused and no probe (`auth.test`) says otherwise."""
    return await client.usable() if isinstance(client, TokenGate) else True
