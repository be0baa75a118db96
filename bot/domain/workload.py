"""Validate the launch settings a requester types into the modal (pure, runs before the ack).

`parse_workload(fields)` returns a `Workload` or raises `WorkloadInvalid` with one message per
field, which the modal shows next to that field. The rules mirror what AI Reserve would refuse
(contract §2.3), so a request that reaches an approver can actually launch.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

from bot.domain.command_secrets import SecretInCommand, lift_secrets
from bot.domain.idle import parse_idle
from bot.domain.models import IdleRule, Workload
from bot.domain.readiness import parse_rule

RESERVED_ENV = frozenset({
    "NODE_RANK", "NUM_NODES", "GPUS_PER_NODE", "WORLD_SIZE", "NODE_ADDR",
    "PRIMARY_ADDR", "MASTER_ADDR", "PRIMARY_PORT", "MASTER_PORT",
})
DEFAULT_ENV = {"MALLOC_ARENA_MAX": "1"}
MAX_NAME = 64

_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PORT = re.compile(r"^(?P<port>\d{1,5})/(?P<proto>http|tcp)$")
_SSH_KEY = re.compile(
    r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com"
    r"|sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,3}( .*)?$"
)
_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")

FIELDS = ("name", "image", "cmd", "env", "ports", "ssh_keys", "auto_recovery", "readiness",
          "readiness_all", "readiness_limit", "idle_minutes", "idle_all", "idle_done")


class WorkloadInvalid(ValueError):
    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


def default_workload(*, idle: IdleRule | None = None) -> Workload:
    """The launch form's starting values (`idle`: the spend policy's idle rule)."""
    return Workload(env=dict(DEFAULT_ENV), idle=idle)


def secrets_moved(fields: Mapping[str, str | bool]) -> tuple[str, ...]:
    """The names `parse_workload` moved from the start command into the sealed environment
    (for telling the requester); call it on fields `parse_workload` accepted."""
    cmd = fields.get("cmd")
    try:
        return tuple(lift_secrets(shlex.split(cmd)).env) if isinstance(cmd, str) else ()
    except (ValueError, SecretInCommand):
        return ()


def parse_workload(fields: Mapping[str, str | bool]) -> Workload:
    errors: dict[str, str] = {}

    def text(key: str) -> str:
        value = fields.get(key) or ""
        return value.strip() if isinstance(value, str) else ""

    name = text("name")
    if name and (len(name) > MAX_NAME or not _NAME.match(name)):
        errors["name"] = (f"Use lower-case letters, digits and dashes (at most {MAX_NAME}), "
                          "e.g. `dsv3-serve`.")
    image = text("image")
    if image and (len(image) > 255 or not _IMAGE.match(image)):
        errors["image"] = "An image reference like `vllm/vllm-openai:latest`."
    cmd: list[str] = []
    if text("cmd"):
        try:
            cmd = shlex.split(text("cmd"))
        except ValueError as exc:
            errors["cmd"] = f"Can't split this command: {exc}. Check the quotes."
    env: dict[str, str] = {}
    for number, line in enumerate(text("env").splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not _ENV_KEY.match(key):
            errors["env"] = f"Line {number}: write `NAME=value`, one per line."
            break
        if key in RESERVED_ENV:
            errors["env"] = f"`{key}` is set by AI Reserve on every node; leave it out."
            break
        env[key] = value.strip()
    try:
        lifted = lift_secrets(cmd)
    except SecretInCommand as exc:
        errors["cmd"] = str(exc)
    else:
        cmd = list(lifted.command)
        for key, value in lifted.env.items():
            if env.get(key, value) != value:
                errors["cmd"] = (f"`{key}` is set both here and in Environment, differently. "
                                 "Keep it in Environment only (sealed).")
            env[key] = value
    ports: list[str] = []
    for token in re.split(r"[,\s]+", text("ports")):
        if not token:
            continue
        match = _PORT.match(token)
        if not match or not 1 <= int(match["port"]) <= 65535:
            errors["ports"] = (f"`{token[:20]}`: write `<port>/<http|tcp>`, "
                               "e.g. `8000/http, 22/tcp`.")
            break
        if token not in ports:
            ports.append(token)
    keys: list[str] = []
    for number, line in enumerate(text("ssh_keys").splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        if not _SSH_KEY.match(line):
            errors["ssh_keys"] = (f"Line {number} isn't an OpenSSH public key "
                                  "(`ssh-ed25519 AAAA… you@host`).")
            break
        keys.append(line)
    readiness = None
    if text("readiness"):
        rule = parse_rule(text("readiness"), all_ranks=bool(fields.get("readiness_all")),
                          limit_text=text("readiness_limit"))
        if isinstance(rule, dict):
            errors.update(rule)
        else:
            readiness = rule
    idle = parse_idle(text("idle_minutes"), text("idle_done"),
                      all_ranks=bool(fields.get("idle_all")))
    if isinstance(idle, dict):
        errors.update(idle)
        idle = None
    if errors:
        raise WorkloadInvalid(errors)
    return Workload(
        name=name or None, image=image or None, docker_start_cmd=tuple(cmd), env=env,
        ports=tuple(ports), ssh_keys=tuple(keys), auto_recovery=bool(fields.get("auto_recovery")),
        readiness=readiness, idle=idle,
    )
