"""The "Request launch" modal: the workload settings that do not change the price.

Block ids are fixed (`FIELD_*`): `read_modal` reads the submission by them, and a listener answers
validation errors keyed by them (`response_action="errors"`). Each input's action id equals its
block id.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from slack_sdk.models.blocks import (
    Block,
    CheckboxesElement,
    InputBlock,
    Option,
    PlainTextInputElement,
)
from slack_sdk.models.views import View

from bot.domain.idle import DONE_PRESETS, MAX_MINUTES, MIN_MINUTES
from bot.domain.models import DEFAULT_LIMIT_MINUTES, QuoteInfo, Workload
from bot.domain.readiness import PRESETS, TORCHRUN_TEMPLATE, VLLM_TEMPLATE
from bot.slack import ids
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *
from bot.slack.blocks.planning import SHM

FIELD_NAME = "launch_name"
FIELD_IMAGE = "launch_image"
FIELD_CMD = "launch_cmd"
FIELD_ENV = "launch_env"
FIELD_PORTS = "launch_ports"
FIELD_SSH_KEYS = "launch_ssh_keys"
FIELD_AUTO_RECOVERY = "launch_auto_recovery"
FIELD_READINESS = "launch_readiness"
FIELD_READINESS_LIMIT = "launch_readiness_limit"
FIELD_READINESS_ALL = "launch_readiness_all"
FIELD_IDLE_MINUTES = "launch_idle_minutes"
FIELD_IDLE_ALL = "launch_idle_all"
FIELD_IDLE_DONE = "launch_idle_done"
FIELD_NO_SSH_OK = "launch_no_ssh_ok"
FIELD_WAIT_HOURS = "launch_wait_hours"  # only on the form of a quote with no stock
NO_SSH_OK = "nobody-can-log-in"
NO_SSH_ERROR = ("No SSH key: nobody can log in to the nodes. Add a key above, or tick this box "
                "to launch without one.")
TEXT_FIELDS = (FIELD_NAME, FIELD_IMAGE, FIELD_CMD, FIELD_ENV, FIELD_PORTS, FIELD_SSH_KEYS,
               FIELD_READINESS, FIELD_READINESS_LIMIT, FIELD_IDLE_MINUTES, FIELD_IDLE_DONE)
AUTO_RECOVERY_ON = "on"
READINESS_ALL_ON = "all"
IDLE_ALL_ON = "all"

READINESS_HINT = (
    "AI Reserve's `running` is infrastructure only: it does not check your server or the "
    "rendezvous. Give the log line that says it serves and the bot posts *Serving* when rank 0 "
    "prints it (with what waiting billed). A preset — "
    + ", ".join(f"`{name}` ({label})" for name, (label, _) in PRESETS.items())
    + " — or a regular expression, e.g. `Uvicorn running on`."
)
READINESS_LIMIT_HINT = (
    f"Minutes after ready before you are asked to terminate or keep waiting "
    f"(default {DEFAULT_LIMIT_MINUTES})."
)

ENV_HINT = (
    "One KEY=VALUE per line. MALLOC_ARENA_MAX=1 is recommended for tensor-parallel workloads "
    "(AI Reserve's docs): it stops glibc from creating one malloc arena per thread, which "
    "otherwise inflates host memory on many-GPU nodes. " + SHM + " Values go to the provider "
    "only (kept encrypted until the launch); Slack messages show the keys."
)
SSH_HINT = "One OpenSSH public key per line. Without a key you can't log in to the nodes."
RECOVERY_HINT = (
    "Off by default at AI Reserve. Without it, a degraded cluster (a node lost) keeps billing at "
    "the full rate until someone acts; with it, lost nodes are restarted on the same hardware."
)
CMD_HINT = "One line, shell-style quoting; it runs on every node (each gets NODE_RANK)."
PORTS_HINT = "Comma-separated <port>/<http|tcp>."


def launch_modal(q: QuoteInfo, *, defaults: Workload, wait_max: int | None = None) -> View:
    """The modal opened by "Request launch" on a quote card (by "Wait for stock" on one with no
    stock, with `wait_max`: the form also asks how long to wait, at most the policy's)."""
    summary = (
        f"*{escaped(shape_label(q.spec.shape, q.accelerator_name))}* in "
        f"{escaped(q.location, 64)}\n"
        f"*{hourly(q.hourly_cents)}* for the whole cluster · {money(q.daily_cents)} per day\n"
        f"Quote {code(escaped(q.id, 64))} expires {when(q.expires_at)}."
    )
    summary_block = section(summary)
    summary_block.block_id = "launch_summary"
    blocks: list[Block] = [
        summary_block,
        _text_input(FIELD_NAME, "Cluster name", defaults.name, placeholder="dsv3-serve"),
        _text_input(FIELD_IMAGE, "Container image", defaults.image,
                    placeholder="vllm/vllm-openai:latest"),
        _text_input(FIELD_CMD, "Docker start command", shlex.join(defaults.docker_start_cmd),
                    placeholder="bash -lc /workspace/start.sh", hint=CMD_HINT),
        start_command_templates(),
        _text_input(FIELD_ENV, "Environment", _env_text(defaults.env), multiline=True,
                    placeholder="MALLOC_ARENA_MAX=1", hint=ENV_HINT),
        _text_input(FIELD_PORTS, "Ports", ", ".join(defaults.ports),
                    placeholder="8000/http, 22/tcp", hint=PORTS_HINT),
        _text_input(FIELD_SSH_KEYS, "SSH public keys", "\n".join(defaults.ssh_keys),
                    multiline=True, placeholder="ssh-ed25519 AAAA… you@example", hint=SSH_HINT),
        _no_ssh_input(),
        _recovery_input(defaults.auto_recovery),
        *readiness_inputs(defaults),
        *idle_inputs(defaults),
    ]
    if wait_max is not None:
        wait = _text_input(FIELD_WAIT_HOURS, "Wait for stock up to (hours)", str(wait_max),
                           placeholder=str(wait_max),
                           hint=f"No stock now: once approved, I re-quote this shape (backing "
                                f"off) and launch when it is in stock at this rate or less. At "
                                f"most {wait_max} hours (the spend policy's).")
        wait.optional = False
        blocks.insert(1, wait)
    return View(
        type="modal",
        callback_id=ids.View.LAUNCH_REQUEST,
        private_metadata=ids.QuoteRef(quote_id=q.id).pack(),
        title=plain("Request launch", 24),
        submit=plain("Ask for approval", 24),
        close=plain("Cancel", 24),
        blocks=blocks,
    )


def read_modal(state_values: Mapping[str, Mapping[str, Any]]) -> dict[str, str | bool]:
    """`view.state.values` → `{FIELD_NAME: "…", …, FIELD_AUTO_RECOVERY: bool}`.

    Absent or empty inputs read as `""` / `False`; text is stripped of surrounding blanks.
    """
    result: dict[str, str | bool] = {}
    for field in TEXT_FIELDS:
        value = _element_state(state_values, field).get("value")
        result[field] = value.strip() if isinstance(value, str) else ""
    selected = _element_state(state_values, FIELD_AUTO_RECOVERY).get("selected_options") or []
    result[FIELD_AUTO_RECOVERY] = any(
        isinstance(option, Mapping) and option.get("value") == AUTO_RECOVERY_ON
        for option in selected
    )
    selected = _element_state(state_values, FIELD_READINESS_ALL).get("selected_options") or []
    result[FIELD_READINESS_ALL] = any(
        isinstance(option, Mapping) and option.get("value") == READINESS_ALL_ON
        for option in selected
    )
    wait = _element_state(state_values, FIELD_WAIT_HOURS)
    if FIELD_WAIT_HOURS in state_values:  # the field is only on a no-stock quote's form
        result[FIELD_WAIT_HOURS] = str(wait.get("value") or "").strip()
    selected = _element_state(state_values, FIELD_IDLE_ALL).get("selected_options") or []
    result[FIELD_IDLE_ALL] = any(
        isinstance(option, Mapping) and option.get("value") == IDLE_ALL_ON for option in selected)
    no_ssh = _element_state(state_values, FIELD_NO_SSH_OK).get("selected_options") or []
    result[FIELD_NO_SSH_OK] = any(
        isinstance(option, Mapping) and option.get("value") == NO_SSH_OK for option in no_ssh)
    return result


def start_command_templates() -> Block:
    """A rank-aware start command to copy: every node runs it and reads the injected env."""
    block = section(
        "*Rank-aware start command* (every node runs the same line; AI Reserve injects "
        "`NODE_RANK`, `NUM_NODES`, `GPUS_PER_NODE`, `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`):\n"
        f"torchrun: ```{TORCHRUN_TEMPLATE}```\nvLLM multi-node: ```{VLLM_TEMPLATE}```")
    block.block_id = "launch_cmd_templates"
    return block


def readiness_inputs(defaults: Workload) -> list[Block]:
    rule = defaults.readiness
    return [
        _text_input(FIELD_READINESS, "Readiness line (optional)", rule.pattern if rule else None,
                    placeholder="vllm", hint=READINESS_HINT),
        _text_input(FIELD_READINESS_LIMIT, "Wait for it (minutes)",
                    str(rule.limit_minutes) if rule else None,
                    placeholder=str(DEFAULT_LIMIT_MINUTES), hint=READINESS_LIMIT_HINT),
        _checkbox(FIELD_READINESS_ALL, "Readiness on",
                  Option(value=READINESS_ALL_ON, text=plain("Every rank must print it")),
                  checked=bool(rule and rule.all_ranks), hint="Off: rank 0 (the primary) only."),
    ]


IDLE_HINT = (f"A cluster bills every hour until terminated. Minutes ({MIN_MINUTES} to "
             f"{MAX_MINUTES}) without a new log line after which the owner is asked whether to "
             "terminate it; the spend policy may terminate it after a grace.")
DONE_HINT = ("A log line that says the job is done (the owner is asked at once). A preset — "
             + ", ".join(f"`{name}` ({label})" for name, (label, _) in DONE_PRESETS.items())
             + " — or a regular expression (linear-time RE2 syntax).")


def idle_inputs(defaults: Workload) -> list[Block]:
    """Idle rules (bot/domain/idle.py), prefilled with the spend policy's defaults."""
    rule = defaults.idle
    return [
        _text_input(FIELD_IDLE_MINUTES, "Idle after (minutes without a new line)",
                    str(rule.quiet_minutes) if rule and rule.quiet_minutes else None,
                    placeholder="30", hint=IDLE_HINT),
        _checkbox(FIELD_IDLE_ALL, "Idle on",
                  Option(value=IDLE_ALL_ON, text=plain("Idle only when every rank is silent")),
                  checked=bool(rule and rule.all_ranks),
                  hint="Off: a silent rank 0 is idle, whatever the other ranks print."),
        _text_input(FIELD_IDLE_DONE, "Done when a line matches (optional)",
                    rule.done if rule and rule.done else None, placeholder="training",
                    hint=DONE_HINT),
    ]


def _no_ssh_input() -> InputBlock:
    """The explicit confirmation a launch without an SSH key needs."""
    option = Option(value=NO_SSH_OK, text=plain("Launch without SSH access (nobody can log in)"))
    return _checkbox(FIELD_NO_SSH_OK, "No SSH key?", option, checked=False,
                     hint="Only needed when no key is given above.")


def _checkbox(field: str, label: str, option: Option, *, checked: bool, hint: str) -> InputBlock:
    """An optional single checkbox whose block and action ids are both `field`."""
    return InputBlock(
        block_id=field,
        label=plain(label, 2000),
        element=CheckboxesElement(action_id=field, options=[option],
                                  initial_options=[option] if checked else None),
        hint=plain(hint, 2000),
        optional=True,
    )


def _element_state(state_values: Mapping[str, Mapping[str, Any]], field: str) -> Mapping[str, Any]:
    block = state_values.get(field) or {}
    element = block.get(field)
    if element is None:  # tolerate another action id: the block holds exactly one element
        element = next(iter(block.values()), None)
    return element if isinstance(element, Mapping) else {}


def _env_text(env: Mapping[str, str]) -> str:
    return "\n".join(f"{key}={value}" for key, value in env.items())


def _text_input(
    field: str,
    label: str,
    initial: str | None,
    *,
    placeholder: str,
    multiline: bool = False,
    hint: str | None = None,
) -> InputBlock:
    return InputBlock(
        block_id=field,
        label=plain(label, 2000),
        element=PlainTextInputElement(
            action_id=field,
            initial_value=initial or None,
            multiline=multiline or None,
            placeholder=plain(placeholder, 150),
        ),
        hint=plain(hint, 2000) if hint else None,
        optional=True,
    )


def _recovery_input(initially_on: bool) -> InputBlock:
    option = Option(value=AUTO_RECOVERY_ON, text=plain("Recover lost nodes automatically"))
    return InputBlock(
        block_id=FIELD_AUTO_RECOVERY,
        label=plain("Automatic recovery", 2000),
        element=CheckboxesElement(
            action_id=FIELD_AUTO_RECOVERY,
            options=[option],
            initial_options=[option] if initially_on else None,
        ),
        hint=plain(RECOVERY_HINT, 2000),
        optional=True,
    )
