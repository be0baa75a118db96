"""Settings: every missing or malformed value is one clear line, and nothing else is read."""

import pytest

from bot.app.cli import main
from bot.config.settings import ConfigError, load_settings, workload_key


def problems(env):
    with pytest.raises(ConfigError) as caught:
        load_settings(env)
    return caught.value.problems


def test_defaults_need_nothing():
    settings = load_settings({})
    assert settings.uses_simulator and not settings.has_slack_credentials
    assert settings.port == 3000 and settings.poll_interval_seconds == 30
    assert settings.database_url == "sqlite:///cluster-bot.db"
    assert settings.slack_api_url == "https://slack.com/api/"


def test_approvers_are_split_and_checked():
    assert load_settings({"APPROVERS": "U01, W02 ,"}).approvers == ("U01", "W02")
    [line] = problems({"APPROVERS": "U01,alice"})
    assert line.startswith("APPROVERS:") and "alice" in line


@pytest.mark.parametrize(("env", "starts"), [
    ({"PORT": "http"}, "PORT:"),
    ({"POLL_INTERVAL_SECONDS": "0"}, "POLL_INTERVAL_SECONDS:"),
    ({"APPROVALS_CHANNEL": "#approvals"}, "APPROVALS_CHANNEL:"),
    ({"SLACK_API_URL": "slack.com"}, "SLACK_API_URL:"),
    ({"LOG_LEVEL": "LOUD"}, "LOG_LEVEL:"),
    ({"AIRESERVE_API_URL": "https://api.aireserve.test/v1"}, "AIRESERVE_API_URL and"),
])
def test_each_malformed_setting_is_named(env, starts):
    [line] = problems(env)
    assert line.startswith(starts), line


def test_empty_values_count_as_unset():
    settings = load_settings({"SLACK_BOT_TOKEN": "", "AIRESERVE_API_URL": ""})
    assert not settings.has_slack_credentials and settings.uses_simulator


def test_serve_needs_slack_and_says_what_is_missing():
    with pytest.raises(ConfigError) as caught:
        load_settings({}).require_slack()
    text = "\n".join(caught.value.problems)
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "APPROVALS_CHANNEL", "APPROVERS"):
        assert name in text
    socket = load_settings({"SLACK_BOT_TOKEN": "xoxb-t", "SLACK_APP_TOKEN": "xapp-t",
                            "APPROVALS_CHANNEL": "C0APPROVALS", "APPROVERS": "U0BOB"})
    socket.require_slack()  # Socket Mode needs no signing secret
    assert socket.socket_mode


def test_secrets_are_not_shown_in_reprs():
    settings = load_settings({"SLACK_BOT_TOKEN": "xoxb-not-to-be-seen",
                              "AIRESERVE_API_URL": "https://x.test", "AIRESERVE_API_KEY": "k1"})
    assert "xoxb-not-to-be-seen" not in repr(settings) and "k1'" not in repr(settings)


def test_cli_serve_stops_with_one_line_per_problem(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)  # no .env here
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN",
                 "APPROVALS_CHANNEL", "APPROVERS", "AIRESERVE_API_URL", "AIRESERVE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PORT", "eighty")
    with pytest.raises(SystemExit) as caught:
        main(["serve"])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "configuration: PORT:" in err and "Traceback" not in err


def test_env_file_is_read(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("APPROVERS", raising=False)
    (tmp_path / ".env").write_text("APPROVERS=U0BOB,U0CAROL\n")
    assert load_settings().approvers == ("U0BOB", "U0CAROL")


def test_a_malformed_policy_file_stops_the_bot_with_the_line(monkeypatch, tmp_path, capsys):
    err = _serve_with_policy(monkeypatch, tmp_path, capsys, (
        "approvers:\n  users: [U0BOB]\napproval:\n  auto_approve_below: 20.00\n"
        "  one_approver_up_to: 10.00\nlimits:\n  max_nodez: 4\n"))
    assert "policy.yaml:5:" in err and "policy.yaml:7:" in err and "max_nodez" in err


def test_a_bad_installation_in_the_policy_file_stops_the_bot_naming_its_key(
        monkeypatch, tmp_path, capsys):
    err = _serve_with_policy(monkeypatch, tmp_path, capsys, (
        "approvers: {users: [U0BOB]}\ninstallations:\n  T0ONE:\n"
        "    aprovers: {users: [U0ONE]}\n"))
    [line] = [line for line in err.splitlines() if "POLICY_FILE" in line]  # one line
    assert line.endswith("policy.yaml:4: installations.T0ONE: unknown key aprovers (did you "
                         "mean approvers?)"), err


def _serve_with_policy(monkeypatch, tmp_path, capsys, text: str) -> str:
    """`cluster-bot serve` with this policy file: it must exit 2; what it said."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy.yaml").write_text(text)
    for name in ("SLACK_APP_TOKEN", "AIRESERVE_API_URL", "AIRESERVE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "s")
    monkeypatch.setenv("APPROVALS_CHANNEL", "C0APPROVALS")
    monkeypatch.setenv("POLICY_FILE", str(tmp_path / "policy.yaml"))
    with pytest.raises(SystemExit) as caught:
        main(["serve"])
    assert caught.value.code == 2
    err: str = capsys.readouterr().err
    return err


def test_serve_needs_a_provider_or_the_simulator_by_name():
    with pytest.raises(ConfigError) as caught:
        load_settings({}).require_provider()
    [line] = caught.value.problems
    assert "AIRESERVE_API_URL" in line and "AIRESERVE_SIMULATOR=embedded" in line
    load_settings({"AIRESERVE_SIMULATOR": "Embedded"}).require_provider()
    load_settings({"AIRESERVE_API_URL": "https://x.test", "AIRESERVE_API_KEY": "k"}
                  ).require_provider()
    assert problems({"AIRESERVE_SIMULATOR": "fake"})[0].startswith("AIRESERVE_SIMULATOR:")
    [both] = problems({"AIRESERVE_SIMULATOR": "embedded", "AIRESERVE_API_URL": "https://x.test",
                       "AIRESERVE_API_KEY": "k"})
    assert "contradict" in both


def test_log_format_is_text_or_json():
    assert load_settings({}).log_format == "text"
    assert load_settings({"LOG_FORMAT": "JSON"}).log_format == "json"
    assert problems({"LOG_FORMAT": "xml"})[0].startswith("LOG_FORMAT:")


@pytest.mark.parametrize(("env", "starts", "hint"), [
    ({"SLACK_BOT_TOKEN": "foo"}, "SLACK_BOT_TOKEN:", "xoxb-"),
    ({"SLACK_APP_TOKEN": "xoxb-swapped"}, "SLACK_APP_TOKEN:", "xapp-"),
    ({"DATABASE_URL": "mysql://u:hunter2@db/bot"}, "DATABASE_URL:", "postgresql://"),
    ({"DATABASE_URL": "bot.db"}, "DATABASE_URL:", "sqlite:///"),
])
def test_tokens_and_database_urls_are_checked_without_echoing_them(env, starts, hint):
    [line] = problems(env)
    assert line.startswith(starts) and hint in line, line
    assert "foo" not in line and "hunter2" not in line and "swapped" not in line


def test_postgresql_without_its_driver_says_which_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "asyncpg" else real(name, *a))
    [line] = problems({"DATABASE_URL": "postgresql://bot@db/bot"})
    assert line.startswith("DATABASE_URL:") and "cluster-bot[postgres]" in line


def test_secrets_come_from_files_or_a_secrets_dir(tmp_path):
    (tmp_path / "token").write_text("xoxb-from-a-file\n")
    (tmp_path / "url").write_text("sqlite:///from-file.db")
    settings = load_settings({"SLACK_BOT_TOKEN_FILE": str(tmp_path / "token"),
                              "DATABASE_URL_FILE": str(tmp_path / "url")})
    assert settings.slack_bot_token is not None
    assert settings.slack_bot_token.get_secret_value() == "xoxb-from-a-file"
    assert settings.database_url == "sqlite:///from-file.db"
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "SLACK_SIGNING_SECRET").write_text("s3cret")
    (secrets / "aireserve_api_key").write_text("key-1")
    settings = load_settings({"SECRETS_DIR": str(secrets),
                              "AIRESERVE_API_URL": "https://x.test"})
    assert settings.slack_signing_secret is not None and settings.aireserve_api_key is not None
    assert settings.slack_signing_secret.get_secret_value() == "s3cret"
    assert settings.aireserve_api_key.get_secret_value() == "key-1"
    # A value set directly wins over the secrets directory (it is the more specific of the two).
    direct = load_settings({"SECRETS_DIR": str(secrets), "SLACK_SIGNING_SECRET": "direct",
                            "AIRESERVE_API_URL": "https://x.test"})
    assert direct.slack_signing_secret is not None
    assert direct.slack_signing_secret.get_secret_value() == "direct"


def test_a_secret_file_that_cannot_be_used_is_one_line_each(tmp_path):
    (tmp_path / "token").write_text("not-a-token")
    (tmp_path / "empty").write_text("\n")
    lines = problems({"SLACK_BOT_TOKEN_FILE": str(tmp_path / "token"),
                      "SLACK_APP_TOKEN_FILE": str(tmp_path / "missing"),
                      "AIRESERVE_API_KEY_FILE": str(tmp_path / "empty"),
                      "SLACK_SIGNING_SECRET": "s", "SLACK_SIGNING_SECRET_FILE": "/x",
                      "SECRETS_DIR": str(tmp_path / "nowhere")})
    text = "\n".join(lines)
    assert len(lines) == 5, text
    assert "SLACK_APP_TOKEN_FILE:" in text and "No such file" in text
    assert "AIRESERVE_API_KEY_FILE:" in text and "empty" in text
    assert "SLACK_SIGNING_SECRET and SLACK_SIGNING_SECRET_FILE are both set" in text
    assert "SLACK_BOT_TOKEN (from its file): not a bot token" in text
    assert "SECRETS_DIR:" in text and "not-a-token" not in text


def test_the_workload_key_comes_from_a_file_and_a_bad_one_is_one_line(tmp_path):
    key = "k3Jb1q0Vw9yq2oE4m5G6h7J8k9L0m1N2o3P4q5R6s7Y="
    (tmp_path / "key").write_text(key + "\n")
    settings = load_settings({"WORKLOAD_KEY_FILE": str(tmp_path / "key")})
    assert settings.workload_key is not None and settings.workload_key.get_secret_value() == key
    [line] = problems({"WORKLOAD_KEY": "hunter2-not-a-key"})
    assert line.startswith("WORKLOAD_KEY:") and "Fernet" in line and "hunter2" not in line
    assert "`cluster-bot new-key`" in line  # what makes one, with the bot's own libraries


def test_new_key_prints_a_new_workload_key_each_time(capsys):
    keys = []
    for _ in range(2):
        assert main(["new-key"]) == 0
        keys.append(capsys.readouterr().out)
    assert keys[0] != keys[1] and all(key.endswith("\n") for key in keys)
    for key in keys:  # each one a key the setting takes
        settings = load_settings({"WORKLOAD_KEY": key.strip()})
        assert settings.workload_key is not None


def test_without_a_workload_key_one_is_derived_from_the_signing_secret_or_app_token():
    def key_of(env: dict[str, str]) -> str | None:
        return workload_key(load_settings(env))

    key = key_of({"SLACK_SIGNING_SECRET": "s3cret"})
    assert key is not None and key == key_of({"SLACK_SIGNING_SECRET": "s3cret"})  # stable
    assert "s3cret" not in key and key != key_of({"SLACK_SIGNING_SECRET": "other"})
    assert key_of({"SLACK_APP_TOKEN": "xapp-1"}) is not None
    assert key_of({}) is None  # the local workspace: an ephemeral key
    own = "k3Jb1q0Vw9yq2oE4m5G6h7J8k9L0m1N2o3P4q5R6s7Y="
    assert key_of({"SLACK_SIGNING_SECRET": "s3cret", "WORKLOAD_KEY": own}) == own


def test_version(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["--version"])
    assert caught.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("cluster-bot ") and out.split()[1][0].isdigit()


def test_audit_export_never_creates_a_database(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'typo.db'}")
    assert main(["audit-export"]) == 2
    err = capsys.readouterr().err
    assert "no database at" in err and "typo.db" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "other.db").write_bytes(b"")  # a file, but not the bot's schema
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'other.db'}")
    assert main(["audit-export"]) == 2
    assert "cluster-bot migrate" in capsys.readouterr().err
    assert (tmp_path / "other.db").read_bytes() == b""
