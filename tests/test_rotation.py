"""Rotating secrets without downtime (docs/operations.md "Rotating secrets").

The Slack signing secret: with SLACK_SIGNING_SECRET_PREVIOUS set, requests signed with the old
secret and with the new one are both Slack's, anything else is still a 401, so replicas can
be rolled one by one while Slack switches. A workload key derived from the signing secret (no
WORKLOAD_KEY) or a WORKLOAD_KEY_PREVIOUS keeps opening the values sealed before the change.
"""

from __future__ import annotations

import json
import time

import aiohttp
import pytest

from bot.app import runtime
from bot.config.settings import load_settings, previous_workload_keys, workload_key
from devslack.requests import signed_headers
from storage import sealing
from tests.test_serve import ENV

OLD, NEW = "old-signing-secret", "new-signing-secret"


@pytest.mark.parametrize(("signed_with", "status"), [(OLD, 200), (NEW, 200), ("other", 401)])
async def test_both_signing_secrets_are_accepted_during_a_rotation(tmp_path, signed_with,
                                                                   status):
    settings = load_settings({**ENV, "SLACK_SIGNING_SECRET": NEW,
                              "SLACK_SIGNING_SECRET_PREVIOUS": OLD,
                              "DATABASE_URL": f"sqlite:///{tmp_path / 'b.db'}"})
    body = json.dumps({"type": "url_verification", "challenge": "c-42", "token": "t"}).encode()
    headers = signed_headers(body, secret=signed_with, timestamp=int(time.time()),
                             content_type="application/json")
    async with runtime.start(settings, scheduler=False) as rt, \
            runtime.http_site(rt, host="127.0.0.1", port=0) as url, \
            aiohttp.ClientSession() as session, \
            session.post(f"{url}/slack/events", data=body, headers=headers) as response:
        assert response.status == status
        if status == 200:
            assert "c-42" in await response.text()


def test_values_sealed_before_a_signing_secret_rotation_still_open():
    before = load_settings({**ENV, "SLACK_SIGNING_SECRET": OLD})
    after = load_settings({**ENV, "SLACK_SIGNING_SECRET": NEW,
                           "SLACK_SIGNING_SECRET_PREVIOUS": OLD})
    try:
        sealing.configure(workload_key(before))
        sealed = sealing.seal_env({"HF_TOKEN": "hf_secret"})
        sealing.configure(workload_key(after), previous=previous_workload_keys(after))
        assert sealing.unseal_env(sealed) == {"HF_TOKEN": "hf_secret"}
        sealing.configure(workload_key(after))  # the rotation finished: the old key is gone
        with pytest.raises(sealing.UnreadableSecret):
            sealing.unseal_env(sealed)
    finally:
        sealing.configure(None)


def test_a_previous_workload_key_still_opens_what_it_sealed():
    from cryptography.fernet import Fernet

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings = load_settings({**ENV, "WORKLOAD_KEY": new, "WORKLOAD_KEY_PREVIOUS": old})
    try:
        sealing.configure(old)
        sealed = sealing.seal_env({"K": "v"})
        sealing.configure(workload_key(settings), previous=previous_workload_keys(settings))
        assert sealing.unseal_env(sealed) == {"K": "v"}
    finally:
        sealing.configure(None)
