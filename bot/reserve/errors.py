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
from typing import Any, ClassVar

from bot.reserve.schemas import ErrorBody, ErrorDetail


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

    @property
    def field(self) -> str | None:
        return self._detail("field")  # type: ignore[no-any-return]

    @property
    def reason(self) -> str | None:
        return self._detail("reason")  # type: ignore[no-any-return]


class InvalidShape(InvalidRequest):
    code = "invalid_shape"

    @property
    def minimum(self) -> int | None:
        return self._detail("min")  # type: ignore[no-any-return]

    @property
    def maximum(self) -> int | None:
        return self._detail("max")  # type: ignore[no-any-return]

    @property
    def sales_contact(self) -> bool:
        return bool(self._detail("salesContact"))


class Unauthenticated(ApiError, PermissionError):
    status = 401
    code = "unauthenticated"


class PaymentRequired(ApiError):
    status = 402
    code = "payment_required"

    @property
    def required_cents(self) -> int | None:
        return self._detail("requiredCents")  # type: ignore[no-any-return]

    @property
    def balance_cents(self) -> int | None:
        return self._detail("balanceCents")  # type: ignore[no-any-return]


class Forbidden(ApiError, PermissionError):
    status = 403
    code = "forbidden"


class NotFound(ApiError, LookupError):
    status = 404
    code = "not_found"

    @property
    def resource(self) -> str | None:
        return self._detail("resource")  # type: ignore[no-any-return]


class Conflict(ApiError):
    status = 409
    code = "conflict"


class PriceChanged(Conflict):
    code = "price_changed"

    @property
    def field(self) -> str | None:
        return self._detail("field")  # type: ignore[no-any-return]

    @property
    def quoted(self) -> Any:
        return self._detail("quoted")

    @property
    def requested(self) -> Any:
        return self._detail("requested")


class QuoteExpired(Conflict):
    code = "quote_expired"

    @property
    def expires_at(self) -> str | None:
        return self._detail("expiresAt")  # type: ignore[no-any-return]


class QuoteConsumed(Conflict):
    code = "quote_consumed"

    @property
    def cluster_id(self) -> str | None:
        return self._detail("clusterId")  # type: ignore[no-any-return]


class CapacityUnavailable(Conflict):
    code = "capacity_unavailable"

    @property
    def accelerator(self) -> str | None:
        return self._detail("accelerator")  # type: ignore[no-any-return]

    @property
    def location(self) -> str | None:
        return self._detail("location")  # type: ignore[no-any-return]

    @property
    def nodes_placeable(self) -> int | None:
        return self._detail("nodesPlaceable")  # type: ignore[no-any-return]


class VolumeAttached(Conflict):
    code = "volume_attached"

    @property
    def volume_id(self) -> str | None:
        return self._detail("volumeId")  # type: ignore[no-any-return]

    @property
    def cluster_id(self) -> str | None:
        return self._detail("clusterId")  # type: ignore[no-any-return]


class NotDegraded(Conflict):
    code = "not_degraded"

    @property
    def cluster_status(self) -> str | None:
        return self._detail("status")  # type: ignore[no-any-return]


class RecoveryInProgress(Conflict):
    code = "recovery_in_progress"


class RecoveryExhausted(Conflict):
    code = "recovery_exhausted"

    @property
    def attempts_used(self) -> int | None:
        return self._detail("attemptsUsed")  # type: ignore[no-any-return]

    @property
    def attempts_max(self) -> int | None:
        return self._detail("attemptsMax")  # type: ignore[no-any-return]


class InvalidState(Conflict):
    code = "invalid_state"

    @property
    def cluster_status(self) -> str | None:
        return self._detail("status")  # type: ignore[no-any-return]


class IdempotencyKeyInUse(Conflict):
    code = "idempotency_key_in_use"
    retryable = True


class IdempotencyKeyReused(ApiError):
    status = 422
    code = "idempotency_key_reused"


class RateLimited(ApiError):
    status = 429
    code = "rate_limited"
    retryable = True

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after

    @property
    def retry_after_seconds(self) -> int | None:
        return None if self.retry_after is None else max(1, round(self.retry_after))


class ServerError(ApiError):
    status = 500
    code = "internal_error"
    retryable = True

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after

    @property
    def retry_after_seconds(self) -> int | None:
        return None if self.retry_after is None else max(1, round(self.retry_after))


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
    if issubclass(cls, RateLimited | ServerError):
        retry_after = parse_retry_after(headers.get("Retry-After"), now=now)
        if retry_after is None and detail is not None and detail.retry_after_seconds is not None:
            retry_after = float(detail.retry_after_seconds)
        return cls(message, retry_after=retry_after, **kwargs)
    return cls(message, **kwargs)


def is_retryable_status(error: ApiError) -> bool:
    """429/502/503/504 and transport failures: worth the same request again (contract §10)."""
    return isinstance(error, RateLimited | ProviderError | ServiceUnavailable | ProviderTimeout
                      | TransportError | IdempotencyKeyInUse)
