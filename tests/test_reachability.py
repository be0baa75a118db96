"""Reachability from real call outcomes (bot/observability/reachability.py): an answer — a
429 included — is reachable, no answer or a 5xx is not, and only a failure lasting past the
budget is a /readyz reason; the idle prober calls only services nobody called lately. Time is
a fake `now`."""

from __future__ import annotations

from bot.observability.reachability import (
    Connection,
    Prober,
    Reachability,
    provider_outcome,
    slack_outcome,
)


class Now:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_red_only_past_the_budget_and_green_at_the_next_answer():
    now = Now()
    reach = Reachability("AI Reserve", 120, now=now)
    assert reach.problem() is None
    provider_outcome(reach, "error")
    now.t += 60
    provider_outcome(reach, "503")
    assert reach.problem() is None  # within budget: a blip
    now.t += 61
    problem = reach.problem()
    assert problem is not None and problem.startswith("AI Reserve: unreachable for 121 s")
    assert "HTTP 503" in problem and "budget 120 s" in problem
    provider_outcome(reach, "404")  # it answered (the answer's content is another matter)
    assert reach.problem() is None


def test_a_backlog_is_not_unreachable():
    now = Now()
    slack, provider = Reachability("slack", 10, now=now), Reachability("AI Reserve", 10, now=now)
    slack_outcome(slack, status=None, error="ClientConnectorError")
    provider_outcome(provider, "error")
    now.t += 5
    slack_outcome(slack, status=429, error=None)  # Slack answered: it is there, just busy
    provider_outcome(provider, "429")
    now.t += 100
    assert slack.problem() is None and provider.problem() is None
    provider_outcome(provider, "error")
    now.t += 5
    provider_outcome(provider, "paused")  # refused locally: says nothing either way
    now.t += 6
    assert provider.problem() is not None


def test_slack_5xx_and_no_answer_count_as_unreachable():
    now = Now()
    slack = Reachability("slack", 10, now=now)
    slack_outcome(slack, status=503, error=None)
    now.t += 11
    assert "last: HTTP 503" in (slack.problem() or "")
    slack_outcome(slack, status=None, error="TimeoutError")
    assert "no answer (TimeoutError)" in (slack.problem() or "")
    slack_outcome(slack, status=200, error=None)
    assert slack.problem() is None


def test_the_socket_connection_is_red_past_its_budget():
    now = Now()
    connection = Connection(30, now=now)
    connection.down()
    now.t += 30
    assert connection.problem() is None
    connection.down()  # still down: counted from the first time
    now.t += 1
    assert (connection.problem() or "").startswith(
        "slack: the Socket Mode connection is down for 31 s")
    connection.up()
    assert connection.problem() is None


async def test_the_prober_calls_only_idle_services():
    now = Now()
    slack = Reachability("slack", 120, now=now, last_outcome_at=now.t)
    provider = Reachability("AI Reserve", 120, now=now, last_outcome_at=now.t)
    calls: list[str] = []

    async def auth_test() -> None:
        calls.append("auth.test")
        slack_outcome(slack, status=None, error="ClientConnectorError")
        raise ConnectionError("refused")  # the client raises after recording

    async def health() -> None:
        calls.append("GET /health")
        provider_outcome(provider, "200")

    prober = Prober(probes={"slack": (slack, auth_test), "AI Reserve": (provider, health)},
                    every_seconds=40)
    await prober.once()
    assert calls == []  # both were heard from just now
    now.t += 30
    provider_outcome(provider, "200")  # a sweep's real call
    now.t += 15
    await prober.once()
    assert calls == ["auth.test"]  # Slack idle for 45 s; AI Reserve answered 15 s ago
    assert slack.failing_since == now.t
