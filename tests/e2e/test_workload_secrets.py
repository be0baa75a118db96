"""Environment values typed in the launch form go to AI Reserve and nowhere else: after a
launch, the database (the SQLite file's bytes, PostgreSQL's rows), the logs and the audit
export hold them nowhere in plain text — and the simulator received them."""

import logging
from typing import Any

import pytest
import sqlalchemy as sa
from cryptography.fernet import Fernet

from aireserve_sim.quotes import QuoteDesk
from bot.domain.models import RequestStatus
from bot.slack.blocks.launch_modal import FIELD_CMD, FIELD_ENV
from bot.slack.ids import Action
from storage import sealing
from tests.e2e.harness import ALICE, BOB, bot


def sa_dialect() -> sa.Dialect:
    return sa.create_engine("sqlite://").dialect

SECRET_VALUE = "hf_s3cretvalue_4x9q"


async def test_env_values_are_sealed_at_rest_and_reach_the_provider(
        tmp_path, caplog, monkeypatch, database_url):
    caplog.set_level(logging.DEBUG)
    received: list[dict[str, str]] = []
    launch = QuoteDesk.launch

    def spy(desk: QuoteDesk, req: Any) -> Any:
        received.append(dict(req.env or {}))
        return launch(desk, req)

    monkeypatch.setattr(QuoteDesk, "launch", spy)
    async with bot(tmp_path, database_url=database_url) as h:
        card = await h.request(quote_text="quote h100x8 nodes=2", values={
            FIELD_ENV: {FIELD_ENV: f"MALLOC_ARENA_MAX=1\nHF_TOKEN={SECRET_VALUE}"}})
        await h.click(card, Action.APPROVE, user=BOB)
        await h.advance(60)
        [request] = await h.requests_in_db()
        assert request.cluster_id is not None
        assert received == [{"MALLOC_ARENA_MAX": "1", "HF_TOKEN": SECRET_VALUE}]
        rows = await _all_rows(h.rt.db.engine)
        await h.slash("audit export 2026-11", user=BOB)
        exports = [u.data.decode() for u in h.slack.uploads.uploaded if u.data is not None]
    assert "HF_TOKEN" in rows and sealing.PREFIX in rows  # stored, sealed
    assert SECRET_VALUE not in rows
    assert SECRET_VALUE not in caplog.text
    assert exports and "launch" in exports[0]
    assert all(SECRET_VALUE not in export for export in exports)
    if database_url is None:
        assert SECRET_VALUE.encode() not in (tmp_path / "bot.db").read_bytes()


async def _all_rows(engine: sa.ext.asyncio.AsyncEngine) -> str:
    async with engine.connect() as conn:
        names = await conn.run_sync(lambda c: sa.inspect(c).get_table_names())
        dumped = []
        for name in names:
            result = await conn.execute(sa.text(f'SELECT * FROM "{name}"'))
            dumped.extend(repr(tuple(row)) for row in result)
    return "\n".join(dumped)


async def test_a_launch_whose_values_cant_be_opened_fails_without_calling_the_provider(
        tmp_path, monkeypatch):
    """The key changed while a request waited (WORKLOAD_KEY replaced, or the signing secret it
    was derived from regenerated): its launch fails for good, saying why, and AI Reserve is
    never called."""
    called: list[object] = []
    monkeypatch.setattr(QuoteDesk, "launch", lambda desk, req: called.append(req))
    async with bot(tmp_path) as h:
        card = await h.request(quote_text="quote h100x8 nodes=2", values={
            FIELD_ENV: {FIELD_ENV: f"HF_TOKEN={SECRET_VALUE}"}})
        monkeypatch.setattr(sealing._KEYS, "configured", Fernet(Fernet.generate_key()))
        monkeypatch.setattr(sealing._KEYS, "ephemeral", Fernet(Fernet.generate_key()))
        await h.click(card, Action.APPROVE, user=BOB)
        await h.advance(60)
        [request] = await h.requests_in_db()
        assert request.status == RequestStatus.FAILED
        assert request.last_error is not None and "WORKLOAD_KEY" in request.last_error
        assert SECRET_VALUE not in request.last_error
    assert called == []


def test_a_value_sealed_with_another_key_stays_sealed_and_says_why(monkeypatch):
    monkeypatch.setattr(sealing._KEYS, "configured", Fernet(Fernet.generate_key()))
    sealed = sealing.seal(SECRET_VALUE)
    assert sealing.is_sealed(sealed) and SECRET_VALUE not in sealed
    assert sealing.seal(sealed) == sealed  # sealing twice is sealing once
    assert sealing.unseal(sealed) == SECRET_VALUE
    monkeypatch.setattr(sealing._KEYS, "configured", Fernet(Fernet.generate_key()))
    monkeypatch.setattr(sealing._KEYS, "ephemeral", Fernet(Fernet.generate_key()))
    with pytest.raises(sealing.UnreadableSecret, match="WORKLOAD_KEY"):
        sealing.unseal(sealed)
    kept = sealing.SealedJSON().process_result_value({"env": {"A": sealed}}, sa_dialect())
    assert kept == {"env": {"A": sealed}}  # the row still reads; only the launch refuses


async def test_a_secret_typed_into_the_start_command_is_moved_into_the_sealed_env(
        tmp_path, caplog, monkeypatch):
    """Issue 24 item 7: `HF_TOKEN=hf_… python train.py` in the start command was stored and
    shown as typed. The assignment moves into the environment (sealed), the command runs
    without it, and the requester is told which name moved."""
    caplog.set_level(logging.DEBUG)
    received: list[Any] = []
    launch = QuoteDesk.launch

    def spy(desk: QuoteDesk, req: Any) -> Any:
        received.append((list(req.docker_start_cmd or []), dict(req.env or {})))
        return launch(desk, req)

    monkeypatch.setattr(QuoteDesk, "launch", spy)
    async with bot(tmp_path) as h:
        card = await h.request(quote_text="quote h100x8 nodes=2", values={
            FIELD_CMD: {FIELD_CMD: f"HF_TOKEN={SECRET_VALUE} CUDA_LAUNCH_BLOCKING=1 "
                                   "python train.py --epochs 3"}})
        assert SECRET_VALUE not in h.text_of(card) and "HF_TOKEN" in h.text_of(card)
        [told] = [m for m in h.slack.dms(ALICE) if "I moved" in h.text_of(m)]
        assert "`HF_TOKEN`" in h.text_of(told) and SECRET_VALUE not in h.text_of(told)
        await h.click(card, Action.APPROVE, user=BOB)
        await h.advance(60)
        rows = await _all_rows(h.rt.db.engine)
    assert received == [(["CUDA_LAUNCH_BLOCKING=1", "python", "train.py", "--epochs", "3"],
                         {"MALLOC_ARENA_MAX": "1", "HF_TOKEN": SECRET_VALUE})]
    assert SECRET_VALUE not in rows and SECRET_VALUE not in caplog.text
    assert SECRET_VALUE.encode() not in (tmp_path / "bot.db").read_bytes()


@pytest.mark.parametrize("command", [
    f"bash -c 'export HF_TOKEN={SECRET_VALUE}; python train.py'",
    f"python train.py --token {SECRET_VALUE}",
])
async def test_a_secret_the_command_needs_in_place_is_refused_naming_where_it_goes(
        tmp_path, command):
    async with bot(tmp_path) as h:
        card = await h.quote("quote h100x8 nodes=2")
        await h.click(card, Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
        reply = await h.submit(h.slack.last_view(ALICE), values={FIELD_CMD: {FIELD_CMD: command}})
        assert reply.status == 200, reply.body
        errors = reply.json["errors"]
        assert list(errors) == [FIELD_CMD] and "Environment" in errors[FIELD_CMD]
        assert SECRET_VALUE not in errors[FIELD_CMD]
        assert await h.requests_in_db() == []
