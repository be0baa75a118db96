"""The `/cluster` command language: a small pure parser.

`parse(text)` turns what follows `/cluster` into one typed command or raises `InvalidCommand`
naming the bad part and showing the right form. It knows the self-serve limits (2–8 nodes,
1–8 GPUs per node); which accelerators exist, and their per-machine maximum, is the catalog's
business (the quoting service checks that).
"""

from __future__ import annotations

import re
from dataclasses import replace

from bot.domain import commands, extension, policies, templates
from bot.domain.errors import InvalidCommand
from bot.domain.readiness import ORCHESTRATORS
from bot.slack.parsing_templates import parse_template

MAX_TEXT = 500

_SHAPE = re.compile(r"^(?P<accel>[a-z0-9][a-z0-9-]*?)x(?P<gpus>[^x]*)$")
_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_CHANNEL = re.compile(
    r"^(?:<#(?P<linked>[CG][A-Z0-9]+)(?:\|[^>]*)?>|(?P<bare>[CG][A-Z0-9]{2,}))$")
# A channel name as Slack allows it (lower-case letters, digits, `-`, `_`; at most 80).
_CHANNEL_NAME = re.compile(r"^#[A-Za-z0-9][A-Za-z0-9_-]{0,79}$")
_MONTH = re.compile(r"^20\d\d-(0[1-9]|1[0-2])$")
_OPTION = re.compile(r"^(?P<key>[A-Za-z]+)=(?P<value>.*)$")
_PROJECT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")
QUOTE_KEYS = ("nodes", "storage", "volume", "location", "disk", "orchestrator", "hours",
              "project")



def _parse_wait(args: list[str]) -> commands.WaitCommand:
    """`wait <request-id> hours=<H>` (or a bare number): the hours are checked by the service
    against the policy's maximum."""
    if not args or not _ID.match(args[0]):
        raise _fail("`/cluster wait` needs the id of your launch request (like "
                    "`lr_3f9a0c1d2e4b`) and the hours to wait, e.g. `hours=12`.",
                    (args[0] if args else "")[:40], "wait")
    if len(args) != 2:
        raise _fail("Say how many hours to wait for stock after the request id, e.g. "
                    "`hours=12`.", " ".join(args[2:])[:40], "wait")
    hours = args[1].lower()
    return commands.WaitCommand(args[0], hours.removeprefix("hours="))


def parse(text: str) -> commands.Command:
    text = (text or "").strip()
    if len(text) > MAX_TEXT:
        raise InvalidCommand(f"That command is {len(text)} characters long; "
                             f"`/cluster` commands are at most {MAX_TEXT}.",
                             bad_part=text[:40] + "…", usage=commands.USAGE["help"])
    if not text:
        return commands.HelpCommand()
    if not text.isascii():
        bad = next(ch for ch in text if not ch.isascii())
        raise InvalidCommand(f"`/cluster` commands use plain ASCII; I can't read `{bad}`.",
                             bad_part=bad, usage=commands.USAGE["help"])
    verb, *args = text.split()
    verb = verb.lower()
    if verb == "quote":
        if any(a.lower().startswith("template=") for a in args):
            return _template_quote(args)
        return _parse_quote(args)
    if verb == "template":
        return parse_template(args)
    if verb == "list":
        return _parse_list(args)
    if verb in ("status", "terminate", "recover"):
        cluster_id = _one_id(args, verb)
        if verb == "status":
            return commands.StatusCommand(cluster_id)
        if verb == "terminate":
            return commands.TerminateCommand(cluster_id)
        return commands.RecoverCommand(cluster_id)
    if verb == "connect":
        return commands.ConnectCommand(_one_id(args, verb))
    if verb == "withdraw":
        if not args:
            raise _fail("`/cluster withdraw` needs the id of your launch request (it is on the "
                        "request's message, like `lr_3f9a0c1d2e4b`).", "", verb)
        if not _ID.match(args[0]):
            raise _fail(f"`{args[0][:40]}` is not a request id (like `lr_3f9a0c1d2e4b`).",
                        args[0], verb)
        _no_more(args[1:], verb)
        return commands.WithdrawCommand(args[0])
    if verb == "waiting":
        _no_more(args, verb)
        return commands.WaitingCommand()
    if verb == "wait":
        return _parse_wait(args)
    if verb == "extend":
        cluster_id = _one_id(args[:1], verb)
        if len(args) != 2:
            raise _fail("Say how many hours to add after the cluster id, e.g. "
                        "`/cluster extend clu_9xQe1 12`.", " ".join(args[2:])[:40], verb)
        return commands.ExtendCommand(cluster_id, extension.check_hours(args[1]))
    if verb == "autorecover":
        cluster_id = _one_id(args[:1], verb)
        switch = " ".join(args[1:]).lower()
        if switch not in ("on", "off"):
            raise _fail(f"Say `on` or `off` after the cluster id, not `{switch[:20]}`.",
                        switch, verb)
        return commands.AutoRecoverCommand(cluster_id, on=switch == "on")
    if verb == "notify":
        cluster_id = _one_id(args[:1], verb)
        channel = _channel(args[1:], verb)
        if channel.startswith("#"):  # typed, not picked: the Slack adapter looks the name up
            return commands.NotifyCommand(cluster_id, "", channel_name=channel[1:])
        return commands.NotifyCommand(cluster_id, channel)
    if verb == "logs":
        cluster_id = _one_id(args[:1], verb)
        node = 0
        for token in args[1:2]:
            option = _OPTION.match(token)
            if not option or option["key"].lower() != "node":
                raise _fail(f"I don't understand `{token[:40]}`; write `node=<rank>`.", token,
                            verb)
            node = _whole(option["value"], "node", "a node rank (0 is the primary)", verb)
        _no_more(args[2:], verb)
        return commands.LogsCommand(cluster_id, node)
    if verb == "audit" and args and args[0].lower() == "export":
        _no_more(args[2:], "audit export")
        if args[1:] and not _MONTH.match(args[1]):
            raise _fail(f"`{args[1][:20]}` is not a month: write `YYYY-MM`, e.g. `2026-11`.",
                        args[1], "audit export")
        return commands.AuditExportCommand(args[1] if args[1:] else None)
    if verb == "audit":
        _no_more(args[1:], verb)
        return commands.AuditCommand(_one_id(args, verb) if args else None)
    if verb == "spend":
        return _parse_spend(args)
    if verb == "volumes":
        _no_more(args, verb)
        return commands.VolumesCommand()
    if verb == "volume":
        return _parse_volume(args)
    if verb == "help":
        return commands.HelpCommand()
    return commands.HelpCommand(unknown=verb[:40])


def _parse_spend(args: list[str]) -> commands.SpendCommand:
    """`spend [YYYY-MM] [by=owner|project]` (`spend project` is `by=project`)."""
    month, by = None, "owner"
    for token in args:
        option = _OPTION.match(token)
        if token.lower() in ("project", "projects"):
            by = "project"
        elif option and option["key"].lower() == "by":
            by = option["value"].lower().removesuffix("s")
            if by not in ("owner", "project"):
                raise _fail(f"`{token[:30]}`: say `by=owner` or `by=project`.", token, "spend")
        elif month is None and _MONTH.match(token):
            month = token
        elif month is None and not option:
            raise _fail(f"`{token[:20]}` is not a month: write `YYYY-MM`, e.g. `2026-11`.",
                        token, "spend")
        else:
            raise _fail(f"`/cluster spend` takes a month and `by=owner|project`; I don't "
                        f"understand `{token[:40]}`.", token, "spend")
    return commands.SpendCommand(month, by=by)


def _parse_volume(args: list[str]) -> commands.GrowVolumeCommand:
    """`volume grow <id> <GB>`: the new size in GB (AI Reserve volumes only grow)."""
    if not args or args[0].lower() != "grow":
        word = args[0][:20] if args else ""
        raise _fail(f"`/cluster volume` does `grow`; I don't understand `{word}`. "
                    "To list volumes: `/cluster volumes`.", word, "volume")
    if len(args) < 3:
        raise _fail("Give the volume id and its new size in GB.", " ".join(args)[:40], "volume")
    volume_id, size = args[1], args[2].lower().removesuffix("gb")
    if not _ID.match(volume_id):
        raise _fail(f"`{volume_id[:40]}` is not a volume id (like `vol_7kP2`).", volume_id,
                    "volume")
    if not size.isdigit() or len(size) > 6 or int(size) == 0:
        raise _fail(f"The new size must be a whole number of GB, e.g. `2000`; got "
                    f"`{args[2][:20]}`.", args[2], "volume")
    _no_more(args[3:], "volume")
    return commands.GrowVolumeCommand(volume_id, int(size))


def _fail(message: str, bad_part: str, verb: str) -> InvalidCommand:
    return InvalidCommand(message, bad_part=bad_part, usage=commands.USAGE[verb])


def _no_more(args: list[str], verb: str) -> None:
    if args:
        raise _fail(f"`/cluster {verb}` takes nothing more; I don't understand `{args[0]}`.",
                    args[0], verb)


def _parse_list(args: list[str]) -> commands.ListCommand:
    if not args:
        return commands.ListCommand()
    page, rest = args[0], args[1:]
    if not (page.isdigit() and len(page) <= 5 and int(page) >= 1):
        raise _fail(f"`{page[:40]}` is not a page number (1, 2, …).", page, "list")
    _no_more(rest, "list")
    return commands.ListCommand(page=int(page))


def _one_id(args: list[str], verb: str) -> str:
    if not args:
        raise _fail(f"`/cluster {verb}` needs a cluster id.", "", verb)
    cluster_id, rest = args[0], args[1:]
    if not _ID.match(cluster_id):
        raise _fail(f"`{cluster_id[:40]}` is not a cluster id (like `clu_9xQe1`).",
                    cluster_id, verb)
    _no_more(rest, verb)
    return cluster_id


def _channel(args: list[str], verb: str) -> str:
    """`<#C123|name>` (what Slack sends with should_escape), a bare channel id, or a channel
    typed by name without Slack linking it (`#approvals`: returned as `#approvals`)."""
    if len(args) != 1:
        raise _fail("Name one channel, e.g. `#ml-infra`.", " ".join(args)[:40], verb)
    match = _CHANNEL.match(args[0])
    if match:
        return match["linked"] or match["bare"]
    if _CHANNEL_NAME.match(args[0]):
        return args[0].lower()
    raise _fail(f"`{args[0][:40]}` is not a channel I can post to; write `#` and its name (e.g. "
                "`#ml-infra`), picked from Slack's list so it is linked.", args[0], verb)


def _whole(value: str, key: str, what: str, verb: str = "quote") -> int:
    if not value.isdigit() or len(value) > 6:
        raise _fail(f"`{key}` must be a whole number of {what}, e.g. `{key}=4`; "
                    f"got `{value[:20]}`.", f"{key}={value[:20]}", verb)
    return int(value)


def _hours(value: str, key: str, verb: str) -> int:
    """A whole, positive number of hours (`hours=0`, `abc`, `1.5` are refused by name)."""
    if not value.isdigit() or len(value) > 5 or int(value) == 0:
        shown = f"{key}={value[:20]}" if verb == "quote" else value[:20]
        raise _fail(f"`{shown}` is not a number of hours: `{key}` must be a whole number of "
                    "hours, at least 1, e.g. `12`.", shown, verb)
    return int(value)


def _planned_hours(value: str) -> int:
    """`hours=` on a quote: any whole number of hours from 1. One too large is a number all the
    same: the quoting service says which limit it passes (the policy's, or ten years)."""
    if value.isdigit() and int(value) > 0:
        return int(value)
    return _hours(value, "hours", "quote")


def _parse_quote(args: list[str]) -> commands.QuoteCommand:
    if not args:
        raise _fail("Which cluster? Give the accelerator and GPUs per node, and the nodes.",
                    "", "quote")
    shape_token, options = args[0].lower(), args[1:]
    if shape_token in commands.SHORT_ACCELERATORS:  # `mi300x` is a name, not `mi300` × nothing
        shape_token = f"{shape_token}x{policies.MAX_GPUS_PER_NODE}"  # a whole node
    match = _SHAPE.match(shape_token)
    if not match:
        raise _fail(f"`{shape_token[:40]}` is not a shape: write `<accelerator>x<gpusPerNode>`, "
                    f"e.g. `h100x8` ({', '.join(commands.SHORT_ACCELERATORS)}).", shape_token,
                    "quote")
    accelerator, gpus_text = match["accel"], match["gpus"]
    if not gpus_text.isdigit() or len(gpus_text) > 3:
        raise _fail(f"The GPUs per node in `{shape_token[:40]}` must be a whole number, "
                    "e.g. `h100x8`.", shape_token, "quote")
    gpus = int(gpus_text)
    label = accelerator.upper() if accelerator in commands.SHORT_ACCELERATORS else accelerator
    policies.check_gpus_per_node(gpus, accelerator_label=label, usage=commands.USAGE["quote"])

    seen: dict[str, str] = {}
    for token in options:
        option = _OPTION.match(token)
        if not option:
            raise _fail(f"I don't understand `{token[:40]}`; options look like `key=value`.",
                        token, "quote")
        key, value = option["key"].lower(), option["value"]
        if key not in QUOTE_KEYS:
            raise _fail(f"Unknown option `{key}`; I know nodes, storage, volume, location, disk, "
                        "orchestrator, hours, project, template.",
                        token, "quote")
        if key in seen:
            raise _fail(f"`{key}` is given twice.", token, "quote")
        if not value:
            raise _fail(f"`{key}=` needs a value.", token, "quote")
        seen[key] = value
    if "nodes" not in seen:
        raise _fail("How many nodes? Add `nodes=<N>` (2–8), e.g. `nodes=4`.", "nodes", "quote")
    nodes = _whole(seen["nodes"], "nodes", "nodes")
    policies.check_nodes(nodes, usage=commands.USAGE["quote"])
    if "storage" in seen and "volume" in seen:
        raise _fail("Use either `storage=<GB>` (a new shared volume) or `volume=<id>` (an "
                    "existing one), not both: a cluster mounts at most one volume.",
                    "volume=" + seen["volume"], "quote")
    volume_id = seen.get("volume")
    location = seen.get("location")
    project = seen.get("project")
    if project is not None and not _PROJECT.match(project):
        raise _fail(f"`project={project[:40]}`: a project name uses letters, digits, `-` and "
                    "`_` (at most 40), e.g. `project=llama-ft`.", f"project={project[:40]}",
                    "quote")
    for key, value in (("volume", volume_id), ("location", location)):
        if value is not None and not _ID.match(value):
            raise _fail(f"`{value[:40]}` is not a valid {key} id.", f"{key}={value[:40]}", "quote")
    orchestrator = seen.get("orchestrator", "none").lower()
    if orchestrator not in ORCHESTRATORS:
        raise _fail(f"`orchestrator={orchestrator[:20]}`: say `none`, `slurm` or `ray` (the "
                    "topology AI Reserve sets up).", f"orchestrator={orchestrator[:20]}", "quote")
    return commands.QuoteCommand(
        accelerator=accelerator,
        gpus_per_node=gpus,
        nodes=nodes,
        storage_gb=_whole(seen["storage"], "storage", "GB") if "storage" in seen else None,
        volume_id=volume_id,
        location=location,
        root_disk_gb=_whole(seen["disk"], "disk", "GB") if "disk" in seen else None,
        orchestrator=orchestrator,
        hours=_planned_hours(seen["hours"]) if "hours" in seen else None,
        project=project,
    )


def _template_quote(args: list[str]) -> commands.TemplateQuoteCommand:
    """`quote template=<name> [shape] [key=value …]`: checked once merged with the template."""
    shape = args[0].lower() if args and not _OPTION.match(args[0]) else None
    options: dict[str, str] = {}
    for token in args[1:] if shape else args:
        option = _OPTION.match(token)
        if not option:
            raise _fail(f"I don't understand `{token[:40]}`; options look like `key=value`.",
                        token, "quote")
        key = option["key"].lower()
        if key in options:
            raise _fail(f"`{key}` is given twice.", token, "quote")
        if key != "template" and key not in QUOTE_KEYS:
            raise _fail(f"Unknown option `{key}`; I know nodes, storage, volume, location, "
                        "disk, orchestrator, hours, project, template.", token, "quote")
        options[key] = option["value"]
    name = options.pop("template")
    if not name:
        raise _fail("`template=` needs the template's name (`/cluster template list`).",
                    "template=", "quote")
    if (problem := templates.name_problem(name)) is not None:
        raise _fail(problem, f"template={name[:templates.MAX_NAME]}", "quote")
    return commands.TemplateQuoteCommand(template=name, shape=shape, options=tuple(options.items()))


def quote_from_template(cmd: commands.TemplateQuoteCommand, *, template_id: str, accelerator: str,
                        gpus_per_node: int, settings: dict[str, str]) -> commands.QuoteCommand:
    """The quote a template asks for, the typed options over the template's `settings`
    (option name → value, as typed on a quote); checked like any typed quote."""
    merged = dict(settings)
    typed = dict(cmd.options)
    if "volume" in typed:
        merged.pop("storage", None)  # a cluster mounts one volume: the typed choice wins
    if "storage" in typed:
        merged.pop("volume", None)
    merged.update(typed)
    shape = cmd.shape or f"{accelerator}x{gpus_per_node}"
    quote = _parse_quote([shape, *(f"{k}={v}" for k, v in merged.items())])
    return replace(quote, template_id=template_id)
