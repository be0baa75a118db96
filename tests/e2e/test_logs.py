"""LOG_FORMAT=json: one JSON object per line carrying the ids at hand, no secrets; text stays
readable; APScheduler's per-run lines and Bolt's start-up warning are gone."""

import io
import json
import logging
import re

import pytest

from bot.logs import configure_logging, log_context, unconfigure_logging
from bot.slack.blocks.launch_modal import FIELD_ENV, FIELD_SSH_KEYS
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, BOB, SECRET, bot


@pytest.fixture
def json_logs():
    stream = io.StringIO()
    configure_logging("DEBUG", "json", stream=stream)
    yield stream
    unconfigure_logging()


async def test_json_lines_carry_the_ids_and_no_secret(tmp_path, json_logs):
    async with bot(tmp_path) as h:
        card = await h.request(quote_text="quote h100x8 nodes=2", values={
            FIELD_ENV: {FIELD_ENV: "MALLOC_ARENA_MAX=1\nHF_TOKEN=hf_supersecretvalue"},
            FIELD_SSH_KEYS: {FIELD_SSH_KEYS: "ssh-ed25519 AAAAC3Nza alice@laptop"},
        })
        await h.click(card, Action.APPROVE, user=BOB)
        cluster_id = (await h.requests_in_db())[-1].cluster_id
        await h.advance(60)
        assert any("ssh -p" in h.text_of(m) for m in h.slack.dms(ALICE))
        await h.slash(f"terminate {cluster_id}")
        await h.click(h.last_ephemeral(ALICE, containing=Action.TERMINATE), Action.TERMINATE,
                      user=ALICE)

        async def broken(*_: object) -> None:
            raise RuntimeError("boom")

        h.rt.services.clusters.live_page = broken  # an unexpected failure: the person gets a ref
        await h.slash("list", user=BOB)
        ref = re.search(r"reference: `(\w+)`", h.text_of(h.slack.ephemerals(BOB)[-1]))
        assert ref is not None

    text = json_logs.getvalue()
    lines = [json.loads(line) for line in text.splitlines()]  # every line is one object
    assert len(lines) > 10
    for line in lines:
        assert {"time", "level", "logger", "message"} <= set(line)
    assert any(line.get("slack_user") == ALICE and line.get("request_id") for line in lines)
    assert any(line.get("cluster_id") == cluster_id for line in lines)
    [error] = [line for line in lines if line.get("error_ref") == ref.group(1)]
    assert error["level"] == "ERROR" and error["slack_user"] == BOB
    assert "RuntimeError" in error["exception"]
    # Different requests, different ids.
    assert len({line["request_id"] for line in lines if "request_id" in line}) >= 5
    for secret in (h.slack.bot_token, SECRET, "hf_supersecretvalue", "ssh -p", "AAAAC3Nza",
                   "test-key"):
        assert secret not in text, secret


def test_text_lines_stay_readable_and_carry_the_context():
    stream = io.StringIO()
    configure_logging("INFO", "text", stream=stream)
    try:
        with log_context(cluster_id="clu_1", slack_user="U0ALICE"):
            logging.getLogger("bot.test").info("terminating")
        logging.getLogger("bot.test").info("plain")
        # APScheduler's "Running job" / "executed successfully" lines are below its floor.
        logging.getLogger("apscheduler.executors.default").info("Running job x")
    finally:
        unconfigure_logging()
    first, second = stream.getvalue().splitlines()
    assert first.endswith("INFO bot.test: terminating [slack_user=U0ALICE cluster_id=clu_1]")
    assert second.endswith("INFO bot.test: plain")


async def test_bolt_does_not_warn_that_the_token_is_unused(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-from-the-environment")
    caplog.set_level(logging.INFO)
    async with bot(tmp_path):
        pass
    assert "will be unused" not in caplog.text
    [start] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("starting:")]
    assert start == ("starting: AI Reserve the embedded simulator (fake clusters); Slack HTTP "
                     "(/slack/events); database sqlite; poll every 30 s; policy file none "
                     "(APPROVERS)")
