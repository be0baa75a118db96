"""The AI Reserve error tree (contract §7) and the one function that maps a wire failure to it.

    ApiError(status, code, message, details, request_id)
    ├── InvalidRequest (400, ValueError)         field, reason
    │   └── InvalidShape (400)                   field, reason, min, max, sales_contact
    ├── Unauthenticated (401, PermissionError)
    ├── PaymentRequired (402)                    required_cents, balance_cents
    ├── Forbidden (403, PermissionError)
    ├── NotFound (404, LookupError)              resource
    ├── Conflict (409)
    │   ├── PriceChanged                         field, quoted, requested
    │   ├── QuoteExpired                         expires_at
    │   ├── QuoteConsumed                        cluster_id
    │   ├── CapacityUnavailable                  accelerator, location, nodes_placeable
    │   ├── VolumeAttached                       volume_id, cluster_id
    │   ├── NotDegraded                          status
    │   ├── RecoveryInProgress                   last_attempt_at
    │   ├── RecoveryExhausted                    attempts_used, attempts_max
    │   ├── InvalidState                         status
    │   └── IdempotencyKeyInUse
    ├── IdempotencyKeyReused (422)
    ├── RateLimited (429)                        retry_after (seconds)
    ├── ServerError (5xx)                        retry_after (seconds, 503 only)
    │   ├── InternalError (500)
    │   ├── ProviderError (502)
    │   ├── ServiceUnavailable (503)
    │   └── ProviderTimeout (504)               the outcome is unknown: reconcile
    └── TransportError (no HTTP answer: connection refused, timeout), ConnectionError

The simulator raises these same classes and renders them with `to_body()`; the client turns
every non-2xx answer back into one with `error_from_response()`. Nothing else looks at a status.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, ClassVar, Generic, TypeVar

from bot.reserve.schemas import ErrorBody, ErrorDetail

T = TypeVar("T")


class Detail(Generic[T]):
    """A typed read-only view of one key of `details` (`err.cluster_id` for `clusterId`)."""

    def __init__(self, key: str) -> None:
        self.key = key

    def __get__(self, error: ApiError | None, owner: type) -> T | None:
        if error is None:
            return self  # type: ignore[return-value]
        value: T | None = error.details.get(self.key)
        return value


class ApiError(Exception):
    """An error answer from AI Reserve (or its simulator)."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"
    retryable: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        details: Mapping[str, Any] | None = None,
        request_id: str | None = None,
        status: int | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        self.request_id = request_id
        # An unknown code keeps what the server said, mapped onto the closest class.
        if status is not None:
            self.status = status  # type: ignore[misc]
        if code is not None:
            self.code = code  # type: ignore[misc]

    def __str__(self) -> str:
        return f"{self.code} ({self.status}): {self.message}"

    def _detail(self, key: str) -> Any:
        return self.details.get(key)

    @property
    def retry_after_seconds(self) -> int | None:
        return None

    def to_body(self, request_id: str) -> dict[str, Any]:
        return ErrorBody(
            error=ErrorDetail(
                code=self.code,
                message=self.message,
                status=self.status,
                request_id=request_id,
                details=self.details,
                retry_after_seconds=self.retry_after_seconds,
            )
        ).to_wire()


class InvalidRequest(ApiError, ValueError):
    status = 400
    code = "invalid_request"

    field = Detail[str]("field")
    reason = Detail[str]("reason")


class InvalidShape(InvalidRequest):
    code = "invalid_shape"

    minimum = Detail[int]("min")
    maximum = Detail[int]("max")

    @property
    def sales_contact(self) -> bool:
        return bool(self._detail("salesContact"))


class Unauthenticated(ApiError, PermissionError):
    status = 401
    code = "unauthenticated"


class PaymentRequired(ApiError):
    status = 402
    code = "payment_required"

    required_cents = Detail[int]("requiredCents")
    balance_cents = Detail[int]("balanceCents")


class Forbidden(ApiError, PermissionError):
    status = 403
    code = "forbidden"


class NotFound(ApiError, LookupError):
    status = 404
    code = "not_found"

    resource = Detail[str]("resource")


class Conflict(ApiError):
    status = 409
    code = "conflict"


class PriceChanged(Conflict):
    code = "price_changed"

    field = Detail[str]("field")
    quoted = Detail[Any]("quoted")
    requested = Detail[Any]("requested")


class QuoteExpired(Conflict):
    code = "quote_expired"

    expires_at = Detail[str]("expiresAt")


class QuoteConsumed(Conflict):
    code = "quote_consumed"

    cluster_id = Detail[str]("clusterId")


class CapacityUnavailable(Conflict):
    code = "capacity_unavailable"

    accelerator = Detail[str]("accelerator")
    location = Detail[str]("location")
    nodes_placeable = Detail[int]("nodesPlaceable")


class VolumeAttached(Conflict):
    code = "volume_attached"

    volume_id = Detail[str]("volumeId")
    cluster_id = Detail[str]("clusterId")


class NotDegraded(Conflict):
    code = "not_degraded"

    cluster_status = Detail[str]("status")


class RecoveryInProgress(Conflict):
    code = "recovery_in_progress"


class RecoveryExhausted(Conflict):
    code = "recovery_exhausted"

    attempts_used = Detail[int]("attemptsUsed")
    attempts_max = Detail[int]("attemptsMax")


class InvalidState(Conflict):
    code = "invalid_state"

    cluster_status = Detail[str]("status")


class IdempotencyKeyInUse(Conflict):
    code = "idempotency_key_in_use"
    retryable = True


class IdempotencyKeyReused(ApiError):
    status = 422
    code = "idempotency_key_reused"


class _ComeBackLater(ApiError):
    """An answer that may say when to try again (`Retry-After`, or the body's seconds)."""

    retryable = True

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after

    @property
    def retry_after_seconds(self) -> int | None:
        return None if self.retry_after is None else max(1, round(self.retry_after))


class RateLimited(_ComeBackLater):
    status = 429
    code = "rate_limited"


class ServerError(_ComeBackLater):
    status = 500
    code = "internal_error"


class InternalError(ServerError):
    status = 500
    code = "internal_error"
    retryable = False  # only with an Idempotency-Key; the client decides per request


class ProviderError(ServerError):
    status = 502
    code = "provider_error"


class ServiceUnavailable(ServerError):
    status = 503
    code = "service_unavailable"


class ProviderTimeout(ServerError):
    """504: the provider call timed out and the outcome is unknown — re-send or reconcile."""

    status = 504
    code = "provider_timeout"


class TransportError(ApiError, ConnectionError):
    """No HTTP answer at all (refused, reset, timed out). For a launch the outcome is unknown."""

    status = 0
    code = "transport_error"
    retryable = True


_BY_CODE: dict[str, type[ApiError]] = {
    cls.code: cls
    for cls in (
        InvalidRequest, InvalidShape, Unauthenticated, PaymentRequired, Forbidden, NotFound,
        PriceChanged, QuoteExpired, QuoteConsumed, CapacityUnavailable, VolumeAttached,
        NotDegraded, RecoveryInProgress, RecoveryExhausted, InvalidState, IdempotencyKeyInUse,
        IdempotencyKeyReused, RateLimited, ProviderError, ServiceUnavailable, ProviderTimeout,
    )
}
_BY_CODE["internal_error"] = InternalError

_BY_STATUS: dict[int, type[ApiError]] = {
    400: InvalidRequest, 401: Unauthenticated, 402: PaymentRequired, 403: Forbidden,
    404: NotFound, 409: Conflict, 422: IdempotencyKeyReused, 429: RateLimited,
    500: InternalError, 502: ProviderError, 503: ServiceUnavailable, 504: ProviderTimeout,
}


def parse_retry_after(value: str | None, *, now: datetime) -> float | None:
    """`Retry-After` in either form: delta-seconds or an HTTP-date (RFC 9110 §10.2.3)."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def error_from_response(
    status: int, body: Any, headers: Mapping[str, str], *, now: datetime
) -> ApiError:
    """Turn a non-2xx answer into a typed error: the only place that looks at a status code.

    The `code` in the body decides the class; an unknown code (or a body that is not the
    contract's envelope, e.g. a proxy's HTML page) falls back to the class for the status.
    """
    detail: ErrorDetail | None = None
    if isinstance(body, dict):
        try:
            detail = ErrorBody.model_validate(body).error
        except ValueError:
            detail = None
    family = _BY_STATUS.get(status) or (ServerError if status >= 500 else ApiError)
    cls = _BY_CODE.get(detail.code, family) if detail else family
    if detail is not None and detail.status and detail.status != status:
        cls = family  # the envelope disagrees with the transport: trust the transport
    message = detail.message if detail else f"HTTP {status} without an error body"
    kwargs: dict[str, Any] = {
        "details": detail.details if detail else {},
        "request_id": (detail.request_id if detail else None) or headers.get("X-Request-Id"),
        "status": status,
        "code": detail.code if detail else None,
    }
    if issubclass(cls, _ComeBackLater):
        retry_after = parse_retry_after(headers.get("Retry-After"), now=now)
        if retry_after is None and detail is not None and detail.retry_after_seconds is not None:
            retry_after = float(detail.retry_after_seconds)
        return cls(message, retry_after=retry_after, **kwargs)
    return cls(message, **kwargs)


def is_retryable_status(error: ApiError) -> bool:
    """429/502/503/504 and transport failures: worth the same request again (contract §10)."""
    return isinstance(error, RateLimited | ProviderError | ServiceUnavailable | ProviderTimeout
                      | TransportError | IdempotencyKeyInUse)
