"""Secrets typed into the launch form's start command (pure; runs before the ack).

The *Environment* box is sealed at rest (storage/sealing.py); the start command is not: it is
shown on the approval card, stored and audited as typed. People still write the shell's way of
passing a secret, `HF_TOKEN=hf_… python train.py`. So:

- a secret-looking assignment at the head of the command (`NAME=value` before the program,
  which is how a shell hands it to the program: as its environment) is moved into the
  environment — sealed there — and the requester is told which names moved;
- a secret-looking assignment or token anywhere else in the command (`bash -c "export
  HF_TOKEN=…"`, `--token hf_…`) can't be moved without changing what runs: the form refuses
  it, naming the variable (never the value) and saying where it belongs.

"Secret-looking": a name that says so (…TOKEN, …SECRET, …PASSWORD, …API_KEY, …) or a value in
a well-known credential format (Hugging Face, OpenAI, GitHub, Slack, AWS, W&B keys).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_ASSIGNMENT = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$", re.DOTALL)
_SECRET_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL"
    r"|AUTH)", re.IGNORECASE)
_SECRET_VALUE = re.compile(
    r"(?<![A-Za-z0-9])(hf_[A-Za-z0-9_]{16,}|sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}"
    r"|wandb_v1_[A-Za-z0-9_]{16,})")
# An assignment inside a longer token or string (`bash -c "export HF_TOKEN=…; …"`).
_INNER_ASSIGNMENT = re.compile(r"(?<![A-Za-z0-9_])(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>\S+)")


@dataclass(frozen=True)
class Lifted:
    """The command without its leading secret assignments, and what they set."""

    command: tuple[str, ...]
    env: dict[str, str]


class SecretInCommand(ValueError):
    """A secret in the command where moving it would change what runs; names, never values."""


def _is_secret(name: str, value: str) -> bool:
    return bool(value) and (bool(_SECRET_NAME.search(name)) or bool(_SECRET_VALUE.search(value)))


def lift_secrets(command: Sequence[str]) -> Lifted:
    """Move the secret-looking `NAME=value` words at the head of `command` into an environment;
    raise `SecretInCommand` for a secret found anywhere else in it."""
    head = 0
    lifted: dict[str, str] = {}
    kept: list[str] = []
    while head < len(command) and (match := _ASSIGNMENT.match(command[head])):
        if _is_secret(match["name"], match["value"]):
            lifted[match["name"]] = match["value"]
        else:
            kept.append(command[head])
        head += 1
    rest = list(command[head:])
    for word in rest:
        for inner in _INNER_ASSIGNMENT.finditer(word):
            if _is_secret(inner["name"], inner["value"]):
                raise SecretInCommand(
                    f"`{inner['name']}=…` in the start command looks like a secret, and the "
                    "command is shown and stored as typed. Put it in Environment (sealed); "
                    "the command still sees it as an environment variable.")
        if _SECRET_VALUE.search(word):
            raise SecretInCommand(
                "The start command holds what looks like a credential (an access token or "
                "key), and the command is shown and stored as typed. Put it in Environment "
                "(sealed) as `NAME=value`; the command reads it from its environment.")
    return Lifted(command=(*kept, *rest), env=lifted)
