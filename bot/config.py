"""Settings from the environment (and `.env` if present), checked once at start.

Built in `main` and passed down; never instantiated at import. `load_settings()` turns every
missing or malformed value into one clear line (`ConfigError.problems`), so a misconfigured bot
stops at start instead of failing on the first click.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")
_CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9]{2,}$")


class ConfigError(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class Settings(BaseSettings):
    """Every setting the bot reads; `.env.example` documents each one."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", case_sensitive=False,
                                      env_ignore_empty=True)

    slack_bot_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_api_url: str = "https://slack.com/api/"
    port: int = Field(default=3000, ge=0, le=65535)
    database_url: str = "sqlite:///cluster-bot.db"
    aireserve_api_url: str | None = None
    aireserve_api_key: SecretStr | None = None
    # `serve` refuses to run against the embedded simulator unless asked to, by name: real
    # Slack credentials with fake clusters behind them must never happen by accident.
    aireserve_simulator: Literal["embedded"] | None = None
    approvals_channel: str | None = None
    approvers: Annotated[tuple[str, ...], NoDecode] = ()
    # 1 s is allowed so that tests of real processes (tests/procs.py) see sweeps, takeovers and
    # readiness within seconds; production keeps the default (AI Reserve's 120/min budget).
    poll_interval_seconds: int = Field(default=30, ge=1, le=3600)
    # How long a replica's claim on a post lasts: if it dies posting, another posts after this.
    outbox_claim_seconds: int = Field(default=120, ge=2, le=3600)
    policy_file: Path | None = None
    # Tests and demos only: a file holding seconds to add to the wall clock, re-read whenever
    # it changes (tests/procs.py moves every bot process's time together with the simulator's).
    clock_offset_file: Path | None = None
    log_level: str = "INFO"
    log_format: Literal["text", "json"] = "text"

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

    @field_validator("slack_api_url", "aireserve_api_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^\s/]+", value):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value

    @field_validator("log_level")
    @classmethod
    def _check_level(cls, value: str) -> str:
        if value.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise ValueError("must be DEBUG, INFO, WARNING or ERROR")
        return value.upper()

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

    def require_provider(self) -> None:
        """For `serve`: a real AI Reserve, or the embedded simulator asked for by name."""
        if self.aireserve_api_url is None and self.aireserve_simulator is None:
            raise ConfigError(["AIRESERVE_API_URL and AIRESERVE_API_KEY are missing (AI "
                               "Reserve's API); set AIRESERVE_SIMULATOR=embedded to serve "
                               "the embedded simulator's fake clusters on purpose"])

    @property
    def uses_simulator(self) -> bool:
        return self.aireserve_api_url is None

    @property
    def socket_mode(self) -> bool:
        return self.slack_app_token is not None

    @property
    def has_slack_credentials(self) -> bool:
        return self.slack_bot_token is not None

    def require_slack(self) -> None:
        """For `serve`: what a real workspace needs, every missing piece on its own line."""
        problems = []
        if self.slack_bot_token is None:
            problems.append("SLACK_BOT_TOKEN is missing (the xoxb- bot token)")
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
    """Read the settings, turning pydantic's report into one line per problem."""
    try:
        if env is not None:
            fields: dict[str, Any] = {k.lower(): v for k, v in env.items()
                                      if v != "" and k.lower() in Settings.model_fields}
            return _Isolated(**fields)
        return Settings(_env_file=env_file or ".env")
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            name = "_".join(str(p) for p in err["loc"]).upper()
            message = str(err["msg"]).removeprefix("Value error, ")
            problems.append(f"{name}: {message}" if name else message)
        raise ConfigError(problems) from None
