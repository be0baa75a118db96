"""No input gets a 500: garbage before authentication is a 401, a signed but malformed request a
400, and nothing is logged at ERROR. The four inputs that once answered 500, then a seeded fuzzed
set: valid signed requests (a command, clicks, a modal submission, events) mutated at random
in their bodies (then signed) or in their headers (then unsigned)."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import random
import time
from typing import Any
from urllib.parse import parse_qsl, urlencode

from bot.slack.ids import Action
from devslack.requests import FORM, Reply
from tests.e2e.harness import ALICE, BOB, SECRET, bot

SEED = 9
BODY_MUTANTS = 400
HEADER_MUTANTS = 120
FIGURES: dict[str, int] = {}


def _signed(body: bytes, content_type: str = FORM) -> dict[str, str]:
    """Signed as Slack signs: over the raw bytes, whatever they are."""
    stamp = str(int(time.time()))
    mac = hmac.new(SECRET.encode(), b"v0:" + stamp.encode() + b":" + body, hashlib.sha256)
    return {"Content-Type": content_type, "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": "v0=" + mac.hexdigest()}


def _payload_body(payload: Any) -> bytes:
    return urlencode({"payload": json.dumps(payload)}).encode()


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


async def _errors(caplog) -> list[str]:
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.ERROR]


async def test_the_four_inputs_that_answered_500(tmp_path, caplog):
    async with bot(tmp_path) as h:
        card = await h.request()
        captured = await _capture(h, lambda: h.requests.click(card, Action.APPROVE, user_id=BOB))
        [payload] = [json.loads(dict(parse_qsl(body.decode()))["payload"]) for body in captured]

        body = urlencode({"command": "/cluster", "text": "help", "user_id": ALICE}).encode()
        huge = {**_signed(body), "X-Slack-Request-Timestamp": "9" * 400}
        assert (await h.requests.raw(body, huge)).status == 401

        for actions in ([], [{}]):
            mutant = _payload_body({**payload, "actions": actions})
            reply = await h.requests.raw(mutant, _signed(mutant))
            assert reply.status == 400, (actions, reply.body)

        deep = f'{{"type":"event_callback","event":{_deep(5000)}}}'.encode()
        assert (await h.requests.raw(deep, _signed(deep, "application/json"))).status == 400
        deep_form = b"payload=" + _deep(5000).encode()
        assert (await h.requests.raw(deep_form, _signed(deep_form))).status == 400
        await h.rt.settle()
        assert await _errors(caplog) == []
        assert [r.status for r in await _requests(h)] == ["pending"]  # nothing was approved


async def _requests(h):
    return await h.requests_in_db()


async def _capture(h, act) -> list[bytes]:
    """The bodies `act` would send, without sending them."""
    captured: list[bytes] = []
    real = h.requests.raw

    async def keep(body: bytes, headers) -> Reply:
        captured.append(body)
        return Reply(200, "", "text/plain", 0.0)

    h.requests.raw = keep
    try:
        await act()
    finally:
        h.requests.raw = real
    return captured


_ODD_VALUES: list[Any] = [None, [], {}, [{}], "", "x" * 5000, -1, 10**30, 1e308, True, "\u0000",
                          "\ud800", [[[[]]]], {"id": None}, "clu_\u202e", 0]


def _paths(node: Any, path: tuple = ()) -> list[tuple]:
    found = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*path, index))
    return found


def _mutate_json(rng: random.Random, doc: Any) -> Any:
    doc = json.loads(json.dumps(doc))
    path = rng.choice(_paths(doc)[1:] or [()])
    if not path:
        return rng.choice(_ODD_VALUES)
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    if rng.random() < 0.3 and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = rng.choice(_ODD_VALUES)
    return doc


def _mutate_body(rng: random.Random, body: bytes, content_type: str) -> bytes:
    roll = rng.random()
    if roll < 0.1:  # byte-level damage
        raw = bytearray(body)
        for _ in range(rng.randint(1, 5)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        return bytes(raw)
    if roll < 0.15:
        return body[: rng.randrange(len(body))]
    if content_type == "application/json":
        return json.dumps(_mutate_json(rng, json.loads(body))).encode()
    fields = dict(parse_qsl(body.decode(), keep_blank_values=True))
    if "payload" in fields:
        if roll < 0.2:
            fields["payload"] = rng.choice(["", "[]", "null", "{", '"x"', _deep(300)])
        else:
            fields["payload"] = json.dumps(_mutate_json(rng, json.loads(fields["payload"])))
        return urlencode(fields).encode()
    key = rng.choice(sorted(fields))
    if roll < 0.3:
        del fields[key]
    else:
        fields[key] = rng.choice(["", "x" * 3000, "\u0000", "%ZZ", "/cluster", "U0NOBODY"])
    return urlencode(fields).encode()


def _mutate_headers(rng: random.Random, body: bytes) -> dict[str, str]:
    headers = _signed(body)
    which = rng.choice(["X-Slack-Request-Timestamp", "X-Slack-Signature"])
    headers[which] = rng.choice([
        "9" * rng.randint(20, 4000), "-1", "1e9", "", " ", "nan", "0x10", "١٢٣", "v0=",
        "v1=" + "0" * 64, "v0=" + "g" * 64, str(int(time.time()) - 400), "\t1", "+5",
        headers[which] + "0", "None",
    ])
    if rng.random() < 0.1:
        del headers[which]
    return headers


async def test_a_fuzzed_set_gets_no_500_and_logs_no_error(tmp_path, caplog):
    rng = random.Random(SEED)
    async with bot(tmp_path) as h:
        card = await h.request()
        quote = h.last_ephemeral(ALICE, containing=Action.QUOTE_REQUEST_LAUNCH)
        await h.click(quote, Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
        modal = h.slack.last_view(ALICE)
        seeds: list[tuple[bytes, str]] = []
        for act in (
            lambda: h.requests.slash(text="quote h100x8 nodes=2", user_id=ALICE),
            lambda: h.requests.slash(text="status", user_id=ALICE),
            lambda: h.requests.click(card, Action.REJECT, user_id=BOB),
            lambda: h.requests.click(quote, Action.QUOTE_DISCARD, user_id=ALICE),
            lambda: h.requests.submit_view(modal, user_id=ALICE),
        ):
            seeds += [(b, FORM) for b in await _capture(h, act)]
        for act in (lambda: h.requests.app_home_opened(ALICE),
                    lambda: h.requests.url_verification()):
            seeds += [(b, "application/json") for b in await _capture(h, act)]

        statuses: dict[int, int] = {}
        for _ in range(BODY_MUTANTS):
            body, content_type = rng.choice(seeds)
            mutant = _mutate_body(rng, body, content_type)
            reply = await h.requests.raw(mutant, _signed(mutant, content_type))
            statuses[reply.status] = statuses.get(reply.status, 0) + 1
            assert reply.status in (200, 400, 404), (reply.status, mutant[:300], reply.body)
        for _ in range(HEADER_MUTANTS):
            body, content_type = rng.choice(seeds)
            reply = await h.requests.raw(body, _mutate_headers(rng, body))
            statuses[reply.status] = statuses.get(reply.status, 0) + 1
            assert reply.status == 401, reply.body
        await h.rt.settle()
        errors = await _errors(caplog)
        assert errors == [], errors[:5]
        FIGURES.update({f"answered {k}": v for k, v in statuses.items()})
        assert statuses.get(400, 0) > 50  # the mutations did reach the shape checks
        print(f"fuzz: {BODY_MUTANTS + HEADER_MUTANTS} inputs, {statuses}")  # noqa: T201
