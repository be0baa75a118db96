"""The product without its development tools (as the image ships it): the simulator and the local
Slack stand-in are asked for through bot.app.devtools, which answers their absence in one line."""

from __future__ import annotations

import importlib.util

import pytest

from bot.app import devtools
from bot.app.cli import main, require_provider
from bot.config.settings import ConfigError, load_settings

REAL_FIND_SPEC = importlib.util.find_spec


@pytest.fixture
def without_dev_tools(monkeypatch):
    def find_spec(name, package=None):
        if name.partition(".")[0] in (devtools.SIMULATOR, devtools.LOCAL_SLACK):
            return None
        return REAL_FIND_SPEC(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_with_the_tools_they_load():
    assert devtools.available(devtools.SIMULATOR) and devtools.available(devtools.LOCAL_SLACK)
    assert devtools.load("devslack.local", "the local workspace").run_local


def test_simulator_command_says_what_is_missing(without_dev_tools, capsys):
    assert main(["simulator"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "`aireserve_sim`, a development tool not installed here" in err[0]


def test_embedded_simulator_setting_is_one_problem(without_dev_tools):
    with pytest.raises(ConfigError) as caught:
        require_provider(load_settings({"AIRESERVE_SIMULATOR": "embedded"}))
    [problem] = caught.value.problems
    assert problem.startswith("AIRESERVE_SIMULATOR=embedded needs `aireserve_sim`")
    assert problem.endswith("set AIRESERVE_API_URL and AIRESERVE_API_KEY")


def test_local_workspace_without_the_stand_in(without_dev_tools, monkeypatch, tmp_path, capsys):
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no .env here
    assert main(["run"]) == 2
    assert "`devslack`" in capsys.readouterr().err
