"""Injected failures and latency for the simulator server (`POST /_sim/faults`, contract §11).

A rule names a route template (`"POST /v1/clusters/{id}/recover"`, `{…}` matching one path
segment) and applies to the next `count` matching requests, in the order rules were added:

- `status` 429/500/502/503 answers the contract's error envelope INSTEAD of running the request
  (429 and 503 carry `Retry-After`): the service refused or failed before doing anything;
- `status` 504 runs the request first and then answers `provider_timeout`: the outcome really is
  unknown, which is what a client must reconcile (re-send with the same Idempotency-Key, or GET);
- `delay_seconds` holds the response that long in REAL time (asyncio.sleep), with or without a
  status; without one the normal response follows the delay.

- `body` "html" answers `status` with a proxy's HTML page instead of the JSON envelope; "truncated"
  (without a status) runs the request and cuts its JSON answer in half.

Injected answers are never stored under an Idempotency-Key: they stand for transport trouble,
not for the outcome of the request.

`POST /_sim/faults/items` corrupts one cluster as the API renders it (a list item and `GET` by id
alike) until the faults are cleared: a field set to a wrong value (`value`: a wrong type, an
unknown status string) or removed (`remove`, e.g. `billing`). `field` is a dotted wire path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from aiohttp import web
from pydantic import Field, JsonValue, StrictBool, StrictFloat, StrictInt, StrictStr

from bot.reserve.errors import (
    ApiError,
    InternalError,
    InvalidRequest,
    ProviderError,
    ProviderTimeout,
    RateLimited,
    ServiceUnavailable,
)
from bot.reserve.schemas import WireRequest

FaultStatus = Literal[429, 500, 502, 503, 504]

_ROUTE = re.compile(r"^(?P<method>[A-Za-z]+) +(?P<path>/v1(?:/[^\s/?#]+)+)$")
_PLACEHOLDER = re.compile(r"\{[^{}/]*\}")


class FaultRequest(WireRequest):
    """Body of `POST /_sim/faults`."""

    route: StrictStr
    status: FaultStatus | None = None
    count: Annotated[StrictInt, Field(ge=1, le=10_000)] = 1
    delay_seconds: Annotated[StrictFloat, Field(ge=0, le=30, allow_inf_nan=False)] | None = None
    retry_after_seconds: Annotated[StrictInt, Field(ge=1, le=3600)] = 1
    body: Literal["html", "truncated"] | None = None


class ItemFault(WireRequest):
    """Body of `POST /_sim/faults/items`: one field of one cluster, wrong or missing."""

    cluster_id: StrictStr
    field: Annotated[StrictStr, Field(min_length=1)]
    value: JsonValue = None
    remove: StrictBool = False

    def apply(self, item: dict[str, Any]) -> dict[str, Any]:
        """A deep-enough copy of `item` with the field changed (a missing parent: unchanged)."""
        out = dict(item)
        *parents, last = self.field.split(".")
        node = out
        for name in parents:
            child = node.get(name)
            if not isinstance(child, dict):
                return out
            node[name] = node = dict(child)
        if self.remove:
            node.pop(last, None)
        else:
            node[last] = self.value
        return out


HTML_502 = ("<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad "
            "Gateway</h1></center><hr><center>nginx</center></body></html>")


@dataclass
class FaultRule:
    """One armed rule; `remaining` counts down as matching requests consume it."""

    method: str
    template: str
    pattern: re.Pattern[str]
    status: int | None
    remaining: int
    delay_seconds: float
    retry_after_seconds: int
    body: str | None = None

    def to_wire(self) -> dict[str, object]:
        return {
            "route": f"{self.method} {self.template}",
            "status": self.status,
            "remaining": self.remaining,
            "delaySeconds": self.delay_seconds,
            "retryAfterSeconds": self.retry_after_seconds,
            **({"body": self.body} if self.body else {}),
        }

    def html_page(self) -> web.Response:
        """A proxy's error page (`body` "html"): not the contract's envelope, not even JSON."""
        return web.Response(status=self.status or 502, text=HTML_502, content_type="text/html")

    @property
    def fails_after_running(self) -> bool:
        return self.status == 504

    def error(self) -> ApiError:
        """The contract envelope this rule answers with (only when `status` is set)."""
        message = f"Injected fault on {self.method} {self.template}."
        retry = float(self.retry_after_seconds)
        if self.status == 429:
            return RateLimited(
                message, retry_after=retry,
                details={"retryAfterSeconds": self.retry_after_seconds, "window": "injected"},
            )
        if self.status == 503:
            return ServiceUnavailable(message, retry_after=retry)
        if self.status == 502:
            return ProviderError(message, details={"retryable": True})
        if self.status == 504:
            return ProviderTimeout(f"{message} The request was carried out: outcome unknown.")
        return InternalError(message)


def cut(fault: FaultRule | None, response: web.StreamResponse) -> web.StreamResponse:
    """The answer cut in half (`body` "truncated"): a connection that dropped mid-body."""
    if fault is None or fault.body != "truncated" or not isinstance(response, web.Response):
        return response
    whole = response.body if isinstance(response.body, bytes) else b""
    return web.Response(status=response.status, body=whole[:len(whole) // 2],
                        content_type="application/json")


@dataclass
class FaultInjector:
    """The armed rules, consumed first-added first."""

    rules: list[FaultRule] = field(default_factory=list)
    items: dict[str, list[ItemFault]] = field(default_factory=dict)

    def corrupt(self, fault: ItemFault) -> ItemFault:
        self.items.setdefault(fault.cluster_id, []).append(fault)
        return fault

    def mangle_page(self, page: dict[str, Any]) -> dict[str, Any]:
        return {**page, "data": [self.mangle(item) for item in page["data"]]}

    def mangle(self, item: dict[str, Any]) -> dict[str, Any]:
        """`item` (a rendered cluster) as the armed item faults corrupt it."""
        for fault in self.items.get(str(item.get("id")), ()):
            item = fault.apply(item)
        return item

    def add(self, req: FaultRequest) -> FaultRule:
        match = _ROUTE.match(req.route.strip())
        if match is None:
            raise InvalidRequest(
                "route must look like 'METHOD /v1/path', e.g. 'POST /v1/clusters/{id}/recover'.",
                details={"field": "route", "reason": "invalid_route"},
            )
        if req.status is None and req.delay_seconds is None and req.body is None:
            raise InvalidRequest(
                "A fault needs a status, a delaySeconds, a body, or some of them.",
                details={"field": "status", "reason": "missing"},
            )
        if (req.body == "html" and req.status is None) or (
                req.body == "truncated" and req.status is not None):
            raise InvalidRequest(
                "body 'html' goes with a status; body 'truncated' goes without one.",
                details={"field": "body", "reason": "invalid"},
            )
        template = match["path"]
        pieces = _PLACEHOLDER.split(template)
        pattern = re.compile("^" + "[^/]+".join(re.escape(p) for p in pieces) + "$")
        rule = FaultRule(
            method=match["method"].upper(), template=template, pattern=pattern, status=req.status,
            remaining=req.count, delay_seconds=req.delay_seconds or 0.0,
            retry_after_seconds=req.retry_after_seconds, body=req.body,
        )
        self.rules.append(rule)
        return rule

    def take(self, method: str, path: str) -> FaultRule | None:
        """Consume one use of the first rule matching this request, if any."""
        for rule in self.rules:
            if rule.method == method and rule.pattern.match(path):
                rule.remaining -= 1
                if rule.remaining <= 0:
                    self.rules.remove(rule)
                return rule
        return None

    def refuse(self, method: str, path: str) -> None:
        """Raise the error of a status fault armed on this request (one use of it), if any."""
        rule = self.take(method, path)
        if rule is not None and rule.status is not None:
            raise rule.error()

    def clear(self) -> None:
        self.rules.clear()
        self.items.clear()
