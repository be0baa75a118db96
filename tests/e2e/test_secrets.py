"""Tokens, the signing secret, env values and SSH details never reach the logs, and SSH details
never reach a channel."""

import logging

from bot.app.cli import configure_logging
from bot.logs import unconfigure_logging
from bot.slack.blocks.launch_modal import FIELD_ENV, FIELD_SSH_KEYS
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, BOB, SECRET, bot


async def test_nothing_secret_is_logged_even_at_debug(tmp_path, caplog):
    configure_logging("DEBUG")
    caplog.set_level(logging.DEBUG)
    try:
        async with bot(tmp_path) as h:
            card = await h.request(values={
                FIELD_ENV: {FIELD_ENV: "MALLOC_ARENA_MAX=1\nHF_TOKEN=hf_supersecretvalue"},
                FIELD_SSH_KEYS: {FIELD_SSH_KEYS: "ssh-ed25519 AAAAC3Nza alice@laptop"},
            })
            assert "hf_supersecretvalue" not in h.text_of(card)
            await h.click(card, Action.APPROVE, user=BOB)
            await h.advance(60)
            dm = "\n".join(h.text_of(m) for m in h.slack.dms(ALICE))
            assert "ssh -p" in dm
            logged = caplog.text
            for secret in (h.slack.bot_token, SECRET, "hf_supersecretvalue", "ssh -p",
                           "AAAAC3Nza"):
                assert secret not in logged, secret
            assert "ssh -p" not in h.channel_payloads()
            assert "hf_supersecretvalue" not in h.channel_payloads()
    finally:
        unconfigure_logging()
