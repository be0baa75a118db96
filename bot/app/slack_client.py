"""The bot's Slack Web API client: paced to Slack's limits, counted, watched for reachability.

Each call waits its turn per method and channel (bot/slack/pacing.py), so a 429 is waited out
once per channel and method, not per call; it is then counted (bot/observability/metrics.py)
and its outcome tells /readyz whether Slack answers (bot/observability/reachability.py).
"""

from __future__ import annotations

from functools import partial

import aiohttp

from bot.config.settings import Settings
from bot.observability.metrics import CountingWebClient, Metrics
from bot.observability.reachability import Reachability
from bot.slack.answers import AnsweredWebClient
from bot.slack.pacing import PacedWebClient, Pacer, parse_limits
from bot.slack.retry import Sleep, retry_handlers


class SlackClient(CountingWebClient, PacedWebClient, AnsweredWebClient):
    """The bot's Web API client: each call counted (metrics) after its pacing (bot/slack/pacing),
    every answer read in one place (bot/slack/answers.py: what isn't Slack's JSON is `NoAnswer`)."""


def slack_client(token: str | None, settings: Settings, *, session: aiohttp.ClientSession,
                 sleep: Sleep, metrics: Metrics, reach: Reachability) -> SlackClient:
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
    return slack


def _stat(stats: object, kind: str) -> float:
    return float(getattr(stats, kind))
