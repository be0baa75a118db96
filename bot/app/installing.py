"""The OAuth mode's parts (SLACK_CLIENT_ID and SLACK_CLIENT_SECRET set): the installations, the
install flow served beside /slack/events, and the `authorize` that finds each request's
installation and whose token each Slack call carries. None of it exists in the single-token
mode."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from slack_bolt.oauth.async_oauth_flow import AsyncOAuthFlow
from slack_sdk.errors import SlackApiError

from bot.app.slack_client import SlackClient
from bot.clock import Clock
from bot.config.settings import Settings
from bot.observability.metrics import Metrics
from bot.services.installations import Installations, RefreshRefused
from bot.slack.oauth import oauth_flow
from bot.slack.tenancy import Tenancy
from storage.db import Database


@dataclass(frozen=True)
class OAuthParts:
    installations: Installations
    flow: AsyncOAuthFlow
    tenancy: Tenancy


def oauth_parts(settings: Settings, *, db: Database, clock: Clock, client: SlackClient,
                holder: str, metrics: Metrics) -> OAuthParts | None:
    """The parts, and `client` told to carry each call's installation's token (`holder`:
    this replica, for the lease on a token's refresh)."""
    if settings.slack_client_id is None or settings.slack_client_secret is None:
        return None
    client_id, secret = settings.slack_client_id, settings.slack_client_secret.get_secret_value()

    async def exchange(refresh_token: str) -> tuple[str, str, int]:
        try:
            answer = await client.oauth_v2_access(client_id=client_id, client_secret=secret,
                                                  grant_type="refresh_token",
                                                  refresh_token=refresh_token)
        except SlackApiError as exc:  # Slack's answer: say its error
            raise RefreshRefused(str(exc.response.get("error") or "error")) from exc
        return (str(answer["access_token"]), str(answer["refresh_token"]),
                int(answer["expires_in"]))

    installations = Installations(db=db, clock=clock, holder=holder)
    installations.refresh_failures = metrics.token_refresh_failures.inc
    flow = oauth_flow(installations, client=client, client_id=settings.slack_client_id,
                      client_secret=settings.slack_client_secret.get_secret_value(),
                      redirect_uri=settings.slack_redirect_uri,
                      authorize_url=settings.slack_authorize_url,
                      refresh_minutes=settings.slack_token_refresh_minutes)
    tokens = client.tokens
    client.tenancy = Tenancy(installations, exchange=exchange, ahead=timedelta(
        minutes=settings.slack_token_refresh_minutes),
        replaced=tokens.retire if tokens is not None else lambda key: None)
    return OAuthParts(installations=installations, flow=flow, tenancy=client.tenancy)
