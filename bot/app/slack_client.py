"""The bot's Slack Web API client: paced to Slack's limits, counted, watched for reachability.

Each call waits its turn per method and channel (bot/slack/pacing.py), so a 429 is waited out
once per channel and method, not per call; it is then counted (bot/observability/metrics.py)
and its outcome tells /readyz whether Slack answers (bot/observability/reachability.py).
"""

from __future__ import annotations

import base64
from functools import partial
from typing import Any

import aiohttp
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.config.settings import Settings
from bot.observability.metrics import CountingWebClient, Metrics
from bot.observability.reachability import Reachability
from bot.slack.answers import AnsweredWebClient
from bot.slack.pacing import PacedWebClient, Pacer, parse_limits
from bot.slack.retry import Sleep, retry_handlers
from bot.slack.tenancy import SERVING, Tenancy
from bot.slack.tokens import TokenGate, Tokens


class SlackClient(TokenGate, CountingWebClient, PacedWebClient, AnsweredWebClient):
    """The bot's Web API client: each call counted (metrics) after its pacing (bot/slack/pacing),
    every answer read in one place (bot/slack/answers.py: what isn't Slack's JSON is `NoAnswer`),
    none sent with a token Slack refuses but the probe (bot/slack/tokens.py).
    With OAuth (`tenancy`) it has no token of its own: each call carries the token of the
    installation it is made for (bot/slack/tenancy.py)."""

    tenancy: Tenancy | None = None

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        auth = kwargs.pop("auth", None)
        if isinstance(auth, dict):  # oauth.v2.access: the app's credentials, HTTP Basic (as
            # slack_sdk sends them, without aiohttp's deprecated BasicAuth)
            pair = f"{auth['client_id']}:{auth['client_secret']}".encode()
            kwargs["headers"] = {**(kwargs.get("headers") or {}),
                                 "Authorization": f"Basic {base64.b64encode(pair).decode()}"}
        tenancy = self.tenancy
        if tenancy is None:
            return await super().api_call(api_method, **kwargs)
        token = await tenancy.token_for(api_method, kwargs)
        if token is not None:
            kwargs["headers"] = {**(kwargs.get("headers") or {}),
                                 "Authorization": f"Bearer {token}"}
        response = await super().api_call(api_method, **kwargs)
        if isinstance(response.data, dict):
            await tenancy.answered(api_method, kwargs, response.data)
        return response

    async def files_upload_v2(self, **kwargs: Any) -> AsyncSlackResponse:
        """An upload is three calls, the first naming no channel: all of them for the
        installation of the channel it goes to."""
        if self.tenancy is None:
            return await super().files_upload_v2(**kwargs)
        found = await self.tenancy.installation_for(kwargs.get("channel")
                                                    or kwargs.get("channel_id"))
        bound = SERVING.set(found)
        try:
            return await super().files_upload_v2(**kwargs)
        finally:
            SERVING.reset(bound)


def slack_client(token: str | None, settings: Settings, *, session: aiohttp.ClientSession,
                 sleep: Sleep, metrics: Metrics, reach: Reachability,
                 tokens: Tokens | None = None) -> SlackClient:
    limits = parse_limits(settings.slack_rate_limits)
    # Paced: slack_sdk's own retry on 429 is left out, the pacer waits those out.
    slack = SlackClient(token=token, base_url=settings.slack_api_url, session=session,
                        retry_handlers=retry_handlers(sleep, rate_limits=not limits))
    slack.pacer = Pacer(limits) if limits else None
    if slack.pacer is not None:
        for kind in ("tried", "held", "refused", "pauses"):
            metrics.slack_paced.labels(kind=kind).set_function(
                partial(_stat, slack.pacer.stats, kind))
    slack.metrics, slack.reach = metrics, reach
    slack.tokens = tokens
    if tokens is not None:
        metrics.slack_tokens_refused.set_function(lambda: tokens.refused_count)
        tokens.changes = lambda state: metrics.slack_token_changes.labels(state=state).inc()
    return slack


def _stat(stats: object, kind: str) -> float:
    return float(getattr(stats, kind))
