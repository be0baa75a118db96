"""Plain-language answers for AI Reserve failures: written once, used by every service."""

from __future__ import annotations

from bot.domain.errors import Conflict, DomainError, InvalidCommand, ProviderUnavailable
from bot.domain.errors import UnknownResource as Unknown
from bot.reserve import errors as api


def explain(exc: api.ApiError, *, usage: str = "", ident: str | None = None) -> DomainError:
    """Map a provider error to what the person is told, with what to do next.

    `ident`: the id the person asked about, so "unknown" names it (the provider's 404 names
    only the kind of resource)."""
    if isinstance(exc, api.InvalidShape):
        note = (" Larger clusters are arranged through AI Reserve sales."
                if exc.sales_contact else "")
        return InvalidCommand(f"AI Reserve refused the shape: {exc.message}{note}",
                              bad_part=exc.field, usage=usage)
    if isinstance(exc, api.InvalidRequest):
        return InvalidCommand(f"AI Reserve refused the request: {exc.message}",
                              bad_part=exc.field, usage=usage)
    if isinstance(exc, api.NotFound):
        kind = exc.resource if exc.resource and exc.resource != "route" else "resource"
        named = ident or str(exc.details.get("id", "") or "")
        if named:
            return Unknown(kind, named)
        return Conflict(f"AI Reserve doesn't know that {kind}: {exc.message}")
    if isinstance(exc, api.VolumeAttached):
        return Conflict(f"Volume `{exc.volume_id}` is attached to cluster `{exc.cluster_id}`; "
                        "terminate that cluster first.")
    if isinstance(exc, api.PaymentRequired):
        return Conflict("AI Reserve needs the account topped up before launching: "
                        f"{exc.message}")
    if isinstance(exc, api.RateLimited):
        wait = f" Try again in {exc.retry_after_seconds} s." if exc.retry_after_seconds else ""
        return ProviderUnavailable(f"AI Reserve is rate limiting us right now.{wait}")
    if isinstance(exc, api.TransportError):
        return ProviderUnavailable("AI Reserve isn't answering right now (no answer to the "
                                   "bot's requests). Nothing was changed; try again in a few "
                                   "minutes.")
    if isinstance(exc, api.ServerError):
        return ProviderUnavailable(f"AI Reserve is failing right now ({exc.code}). Nothing was "
                                   "changed; try again in a few minutes.")
    if isinstance(exc, api.Unauthenticated | api.Forbidden):
        return ProviderUnavailable("The bot's AI Reserve key was refused; ask an admin to "
                                   "check AIRESERVE_API_KEY.")
    return Conflict(f"AI Reserve said no: {exc.message}")


def is_provider_trouble(exc: BaseException) -> bool:
    """An AI Reserve error (any answer or none): a sweep logs it and tries again next run."""
    return isinstance(exc, api.ApiError)


def is_provider_outage(exc: BaseException) -> bool:
    """AI Reserve not answering, failing (5xx) or rate limiting: its reachability says so once
    (bot/observability/reachability.py), so a sweep doesn't repeat it every run."""
    return isinstance(exc, api.ServerError | api.TransportError | api.RateLimited)
