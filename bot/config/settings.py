"""Settings from the environment (and `.env` if present), checked once at start.

Built in `main` and passed down; never instantiated at import. `load_settings()` turns every
missing or malformed value into one clear line (`ConfigError.problems`), so a misconfigured bot
stops at start instead of failing on the first click.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from dotenv import dotenv_values
from pydantic import (
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from storage import pgurl
from storage.sealing import check_key, derived_key

_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")
_CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9]{2,}$")
# The settings that may come from a file instead of the environment: `NAME_FILE=/path`, or a file
# called NAME (or name) in SECRETS_DIR — how Docker/Compose secrets and Kubernetes Secret volumes
# hand them over. The value is the file's text without its trailing newline.
_TOKEN_PATH = "slack_bot_token:path"  # secret_files' note of where the bot token was read
SECRET_SETTINGS = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN",
                   "AIRESERVE_API_KEY", "DATABASE_URL", "WORKLOAD_KEY",
                   "SLACK_SIGNING_SECRET_PREVIOUS", "WORKLOAD_KEY_PREVIOUS", "SLACK_CLIENT_SECRET")
_TOKEN_PREFIX = {"slack_bot_token": ("xoxb-", "a bot token"),
                 "slack_app_token": ("xapp-", "an app-level token")}
_DATABASE_SCHEMES = {"sqlite": "sqlite", "sqlite+aiosqlite": "sqlite",
                     "postgresql": "postgresql", "postgres": "postgresql",
                     "postgresql+asyncpg": "postgresql"}


class ConfigError(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class CannotListen(Exception):
    """The HTTP port can't be bound (in use, or not ours to take): one line, exit 2."""


class Settings(BaseSettings):
    """Every setting the bot reads; `.env.example` documents each one."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", case_sensitive=False,
                                      env_ignore_empty=True)

    slack_bot_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    # While rotating the signing secret: the one being replaced, still accepted (docs/
    # operations.md "Rotating secrets"). Remove it once every replica has the new one.
    slack_signing_secret_previous: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    # Where SLACK_BOT_TOKEN was read from, when from a file (set by `load_settings`, not a
    # setting): read again on SIGHUP and when it changes (bot/app/reload.py).
    _bot_token_path: Path | None = PrivateAttr(default=None)

    @property
    def slack_bot_token_path(self) -> Path | None:
        return self._bot_token_path
    slack_api_url: str = "https://slack.com/api/"
    # Installs through Slack's OAuth flow (several workspaces, an Enterprise organization
    # org-wide): set both in place of SLACK_BOT_TOKEN (docs/operations.md "Install for several
    # workspaces"). SLACK_REDIRECT_URI: the app's redirect URL (https://HOST/slack/oauth_redirect)
    # when it has several; SLACK_AUTHORIZE_URL: Slack's install page (the local Slack's in tests).
    slack_client_id: str | None = None
    slack_client_secret: SecretStr | None = None
    slack_redirect_uri: str | None = None
    slack_authorize_url: str = "https://slack.com/oauth/v2/authorize"
    # Rotating tokens are refreshed this long before they expire (Bolt's default: 2 hours).
    slack_token_refresh_minutes: int = Field(default=120, ge=1, le=720)
    port: int = Field(default=3000, ge=0, le=65535)
    # /healthz, /readyz and /metrics listen apart from Slack's port: burn rate and month spend
    # stay off the port the internet reaches. INTERNAL_HOST: the bind host, if not the public's.
    internal_port: int = Field(default=3001, ge=0, le=65535)
    internal_host: str | None = None
    # /readyz turns red when Slack or AI Reserve has given no answer (or only 5xx) for this
    # long (bot/observability/reachability.py); the Socket Mode WebSocket gets a shorter one.
    unreachable_budget_seconds: int = Field(default=120, ge=1, le=3600)
    # On SIGTERM /readyz turns 503 at once while the Slack listener keeps answering this long
    # (a load balancer or kube-proxy stops routing here meanwhile); then in-flight work
    # finishes and the process exits 0 (bot/app/runtime.py).
    listener_drain_seconds: float = Field(default=5.0, ge=0, le=300)
    socket_budget_seconds: int = Field(default=30, ge=1, le=3600)
    database_url: str = "sqlite:///cluster-bot.db"
    aireserve_api_url: str | None = None
    aireserve_api_key: SecretStr | None = None
    # `serve` refuses to run against the embedded simulator unless asked to, by name: real
    # Slack credentials with fake clusters behind them must never happen by accident.
    aireserve_simulator: Literal["embedded"] | None = None
    approvals_channel: str | None = None
    approvers: Annotated[tuple[str, ...], NoDecode] = ()
    # 1 s is allowed so that tests of real processes (tests/procs/) see sweeps, takeovers and
    # readiness within seconds; production keeps the default (AI Reserve's 120/min budget).
    poll_interval_seconds: int = Field(default=30, ge=1, le=3600)
    # How long a replica's claim on a post lasts: if it dies posting, another posts after this.
    outbox_claim_seconds: int = Field(default=120, ge=2, le=3600)
    # Slack's limits the bot paces its calls to (bot/slack/pacing.py); "off": no pacing (each
    # 429 is waited out alone, as slack_sdk does).
    slack_rate_limits: str = "chat.postMessage=1/s/channel,chat.postMessage=300/min," \
        "chat.update=50/min"
    # How long one Slack Web API call may take, answer included: past it the call has no
    # answer (a post is then "maybe posted": bot/slack/maybe.py), not a wait of minutes.
    slack_timeout_seconds: float = Field(default=30.0, gt=0, le=300)
    policy_file: Path | None = None
    # Tests and demos only: a file holding seconds to add to the wall clock, re-read whenever
    # it changes (tests/procs/ moves every bot process's time together with the simulator's).
    clock_offset_file: Path | None = None
    log_level: str = "INFO"
    # Seals the launch form's environment values at rest (storage/sealing.py). None: derived
    # from the signing secret or app token (`workload_key`), else an in-memory key.
    workload_key: SecretStr | None = None
    workload_key_previous: SecretStr | None = None  # still opens values sealed before a rotation
    log_format: Literal["text", "json"] = "text"

    @field_validator("slack_bot_token", "slack_app_token")
    @classmethod
    def _check_token(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        prefix, what = _TOKEN_PREFIX[str(info.field_name)]
        if value is not None and not value.get_secret_value().startswith(prefix):
            # Never echo the value: a token pasted into the wrong setting is still a secret.
            raise ValueError(f"not {what} (it starts with {prefix}…)")
        return value

    @field_validator("workload_key", "workload_key_previous")
    @classmethod
    def _check_workload_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            try:
                check_key(value.get_secret_value())
            except (ValueError, TypeError):
                raise ValueError("not a Fernet key (32 bytes, urlsafe base64: make one with "
                                 "`cluster-bot new-key`)") from None
        return value

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: str) -> str:
        scheme, sep, _ = value.strip().partition("://")
        kind = _DATABASE_SCHEMES.get(scheme.lower()) if sep else None
        if kind is None:
            shown = f"scheme {scheme!r}" if sep else "a value without a scheme"
            raise ValueError(f"unsupported database ({shown}): use sqlite:///path/to/bot.db "
                             "or postgresql://user:password@host/dbname")
        if kind == "postgresql" and importlib.util.find_spec("asyncpg") is None:
            raise ValueError("PostgreSQL needs the asyncpg driver, which is not installed: "
                             "pip install 'cluster-bot[postgres]'")
        if kind == "postgresql":
            pgurl.check(value)  # libpq's parameters: one it can't honour is named
        return value

    @field_validator("approvers", mode="before")
    @classmethod
    def _split_approvers(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("approvers")
    @classmethod
    def _check_approvers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [v for v in value if not _USER_ID.match(v)]
        if bad:
            raise ValueError(f"not Slack user ids (like U012ABCDEF): {', '.join(bad)}")
        return value

    @field_validator("approvals_channel")
    @classmethod
    def _check_channel(cls, value: str | None) -> str | None:
        if value is not None and not _CHANNEL_ID.match(value):
            raise ValueError(f"{value!r} is not a Slack channel id (like C012ABCDEF)")
        return value

    @field_validator("slack_api_url", "aireserve_api_url", "slack_redirect_uri",
                     "slack_authorize_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^\s/]+", value):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value

    @field_validator("slack_rate_limits")
    @classmethod
    def _rate_limits(cls, value: str) -> str:
        from bot.slack.pacing import parse_limits  # the one parser, where the pacing is

        parse_limits(value)  # ValueError names the bad part
        return value

    @field_validator("log_level")
    @classmethod
    def _check_level(cls, value: str) -> str:
        if value.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise ValueError("must be DEBUG, INFO, WARNING or ERROR")
        return value.upper()

    @model_validator(mode="after")
    def _ports_apart(self) -> Settings:
        if self.port == self.internal_port != 0:
            raise ValueError(f"INTERNAL_PORT and PORT are both {self.port}: health and metrics "
                             "listen on a port of their own (default 3001)")
        return self

    @model_validator(mode="after")
    def _provider_pair(self) -> Settings:
        if (self.aireserve_api_url is None) != (self.aireserve_api_key is None):
            raise ValueError("AIRESERVE_API_URL and AIRESERVE_API_KEY go together: set both to "
                             "use AI Reserve, or neither to run the embedded simulator")
        return self

    @field_validator("aireserve_simulator", "log_format", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _simulator_or_provider(self) -> Settings:
        if self.aireserve_simulator is not None and self.aireserve_api_url is not None:
            raise ValueError("AIRESERVE_SIMULATOR=embedded and AIRESERVE_API_URL contradict "
                             "each other: set one")
        return self

    @model_validator(mode="after")
    def _oauth_pair(self) -> Settings:
        if (self.slack_client_id is None) != (self.slack_client_secret is None):
            raise ValueError("SLACK_CLIENT_ID and SLACK_CLIENT_SECRET go together: set both to "
                             "install through Slack's OAuth flow, or neither for one bot token")
        if self.oauth and self.slack_bot_token is not None:
            raise ValueError("SLACK_CLIENT_ID and SLACK_BOT_TOKEN contradict each other: with "
                             "OAuth every installation brings its own token; set one")
        if self.oauth and self.socket_mode:
            raise ValueError("SLACK_CLIENT_ID needs the HTTP mode (Slack sends installers back "
                             "to /slack/oauth_redirect): unset SLACK_APP_TOKEN")
        return self

    def require_provider(self) -> None:
        """For `serve`: a real AI Reserve, or the embedded simulator asked for by name."""
        if self.aireserve_api_url is None and self.aireserve_simulator is None:
            raise ConfigError(["AIRESERVE_API_URL and AIRESERVE_API_KEY are missing (AI "
                               "Reserve's API); set AIRESERVE_SIMULATOR=embedded to serve "
                               "the embedded simulator's fake clusters on purpose"])

    def start_line(self) -> str:
        """What this process runs against, in one line (never a secret)."""
        provider = ("the embedded simulator (fake clusters)" if self.uses_simulator
                    else self.aireserve_api_url)
        slack = ("Socket Mode" if self.socket_mode
                 else "HTTP (/slack/events)" if self.has_slack_credentials else "none")
        database = self.database_url.split(":", 1)[0].split("+", 1)[0]
        policy = str(self.policy_file) if self.policy_file else "none (APPROVERS)"
        return (f"starting: AI Reserve {provider}; Slack {slack}; database {database}; "
                f"poll every {self.poll_interval_seconds} s; policy file {policy}")

    @property
    def uses_simulator(self) -> bool:
        return self.aireserve_api_url is None

    @property
    def socket_mode(self) -> bool:
        return self.slack_app_token is not None

    @property
    def has_slack_credentials(self) -> bool:
        return self.slack_bot_token is not None or self.oauth

    @property
    def oauth(self) -> bool:
        """Installations through Slack's OAuth flow, each with its own token (else one)."""
        return self.slack_client_id is not None and self.slack_client_secret is not None

    def require_slack(self) -> None:
        """For `serve`: what a real workspace needs, every missing piece on its own line."""
        problems = []
        if self.slack_bot_token is None and not self.oauth:
            problems.append("SLACK_BOT_TOKEN is missing (the xoxb- bot token), or set "
                            "SLACK_CLIENT_ID and SLACK_CLIENT_SECRET to install through OAuth")
        if not self.socket_mode and self.slack_signing_secret is None:
            problems.append("SLACK_SIGNING_SECRET is missing (needed in HTTP mode; "
                            "or set SLACK_APP_TOKEN for Socket Mode)")
        # A policy file names its own approvers and channel (it is checked when it is loaded).
        if self.policy_file is None and self.approvals_channel is None:
            problems.append("APPROVALS_CHANNEL is missing (the channel id for approval cards)")
        if self.policy_file is None and not self.approvers:
            problems.append("APPROVERS is missing (comma-separated Slack user ids), or set "
                            "POLICY_FILE")
        if problems:
            raise ConfigError(problems)


class _Isolated(Settings):
    """Settings from the given mapping only (tests, tools): no process env, no `.env`."""

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings],
                                   init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def load_settings(env: Mapping[str, str] | None = None, *, env_file: Path | None = None
                  ) -> Settings:
    """Read the settings, turning pydantic's report into one line per problem.

    `env`: exactly these variables (tests, tools); None: the process environment and `.env`."""
    source: dict[str, str] = dict(env) if env is not None else {
        **{k: v for k, v in dotenv_values(env_file or ".env").items() if v is not None},
        **os.environ}
    read, problems = secret_files(source)
    token_path = read.pop(_TOKEN_PATH, None)
    from_files: dict[str, Any] = dict(read)
    try:
        if env is not None:
            fields: dict[str, Any] = {k.lower(): v for k, v in env.items()
                                      if v != "" and k.lower() in Settings.model_fields}
            settings: Settings = _Isolated(**fields, **from_files)
        else:
            settings = Settings(_env_file=env_file or ".env", **from_files)
    except ValidationError as exc:
        for err in exc.errors():
            name = "_".join(str(p) for p in err["loc"]).upper()
            if name.lower() in from_files:
                name = f"{name} (from its file)"
            message = str(err["msg"]).removeprefix("Value error, ")
            problems.append(f"{name}: {message}" if name else message)
    if problems:
        raise ConfigError(problems) from None
    settings._bot_token_path = Path(token_path) if token_path else None
    return settings


def secret_files(source: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The secret settings given as files (`NAME_FILE`, or SECRETS_DIR/NAME), read; and one
    problem per file that can't be read or that contradicts a value set directly."""
    values: dict[str, str] = {}
    problems: list[str] = []
    secrets_dir = source.get("SECRETS_DIR") or None
    if secrets_dir is not None and not Path(secrets_dir).is_dir():
        problems.append(f"SECRETS_DIR: {secrets_dir} is not a directory")
        secrets_dir = None
    for name in SECRET_SETTINGS:
        path = source.get(f"{name}_FILE") or None
        if path is not None and source.get(name):
            problems.append(f"{name} and {name}_FILE are both set: set one")
            continue
        if path is None and secrets_dir is not None and not source.get(name):
            found = [p for p in (Path(secrets_dir) / name, Path(secrets_dir) / name.lower())
                     if p.is_file()]
            path = str(found[0]) if found else None
        if path is None:
            continue
        try:
            text = Path(path).read_text(encoding="utf-8").rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "unreadable"
            problems.append(f"{name}_FILE: {path}: {reason}")
            continue
        if not text:
            problems.append(f"{name}_FILE: {path} is empty")
            continue
        values[name.lower()] = text
        if name == "SLACK_BOT_TOKEN":  # read again when it changes (`bot_token_path`)
            values[_TOKEN_PATH] = str(Path(path).resolve())
    return values, problems


def previous_workload_keys(settings: Settings) -> list[str]:
    """Keys that still open values sealed before a rotation (never used to seal): the previous
    WORKLOAD_KEY, or the key derived from the previous signing secret when the key is derived."""
    keys = []
    if settings.workload_key_previous is not None:
        keys.append(settings.workload_key_previous.get_secret_value())
    if settings.workload_key is None and settings.slack_signing_secret_previous is not None:
        keys.append(derived_key(settings.slack_signing_secret_previous.get_secret_value()))
    return keys


def workload_key(settings: Settings) -> str | None:
    """The key sealing workload env values (storage/sealing.py): WORKLOAD_KEY, else one derived
    from the signing secret or the app token (shared by every replica, in no row), else None
    (an ephemeral key: the local workspace)."""
    if settings.workload_key is not None:
        return settings.workload_key.get_secret_value()
    for secret in (settings.slack_signing_secret, settings.slack_app_token):
        if secret is not None:
            return derived_key(secret.get_secret_value())
    return None
