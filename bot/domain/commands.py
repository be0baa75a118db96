"""The `/cluster` commands as typed values (the parser in bot/slack/parsing.py builds them)."""

from __future__ import annotations

from dataclasses import dataclass

USAGE = {
    "quote": "/cluster quote <accel>x<gpusPerNode> nodes=<N> [storage=<GB> | volume=<id>] "
             "[location=<id>] [disk=<GB>] [orchestrator=none|slurm|ray] [hours=<H>] "
             "[project=<name>]   or /cluster quote template=<name> [options]   "
             "e.g. /cluster quote h100x8 nodes=4 hours=36",
    "list": "/cluster list [page]   e.g. /cluster list 2",
    "status": "/cluster status <cluster-id>   e.g. /cluster status clu_9xQe1",
    "terminate": "/cluster terminate <cluster-id>   e.g. /cluster terminate clu_9xQe1",
    "recover": "/cluster recover <cluster-id>   e.g. /cluster recover clu_9xQe1",
    "autorecover": "/cluster autorecover <cluster-id> on|off   e.g. /cluster autorecover "
                   "clu_9xQe1 on",
    "notify": "/cluster notify <cluster-id> #channel   e.g. /cluster notify clu_9xQe1 #ml-infra",
    "logs": "/cluster logs <cluster-id> [node=<rank>]   e.g. /cluster logs clu_9xQe1 node=1",
    "audit": "/cluster audit [<cluster-or-request-id>]   e.g. /cluster audit clu_9xQe1",
    "audit export": "/cluster audit export [YYYY-MM]   e.g. /cluster audit export 2026-11",
    "spend": "/cluster spend [YYYY-MM] [by=owner|project]   e.g. /cluster spend 2026-11 "
             "by=project",
    "template": "/cluster template save <name> <cluster-id> [shared | team=<name>] | "
                "/cluster template list | /cluster template delete <name>   "
                "e.g. /cluster template save llama-serve clu_9xQe1 shared",
    "volumes": "/cluster volumes",
    "volume": "/cluster volume grow <volume-id> <GB>   e.g. /cluster volume grow vol_7kP2 2000",
    "extend": "/cluster extend <cluster-id> <hours>   e.g. /cluster extend clu_9xQe1 12",
    "withdraw": "/cluster withdraw <request-id>   e.g. /cluster withdraw lr_3f9a0c1d2e4b",
    "wait": "/cluster wait <request-id> hours=<H>   e.g. /cluster wait lr_3f9a0c1d2e4b hours=12",
    "waiting": "/cluster waiting",
    "connect": "/cluster connect <cluster-id>   e.g. /cluster connect clu_9xQe1",
    "help": "/cluster help",
}
SHORT_ACCELERATORS = ("h100", "h200", "b200", "a100", "l40s", "mi300x")


@dataclass(frozen=True)
class QuoteCommand:
    accelerator: str  # as typed, lower-case: "h100" or a full catalog id
    gpus_per_node: int
    nodes: int
    storage_gb: int | None = None
    volume_id: str | None = None
    location: str | None = None
    root_disk_gb: int | None = None
    orchestrator: str = "none"  # none | slurm | ray
    hours: int | None = None  # planned run: priced, and the request's envelope
    project: str | None = None  # `project=`: the spend is the project's too
    template_id: str | None = None  # the template it was prefilled from (the launch form too)


@dataclass(frozen=True)
class TemplateQuoteCommand:
    """`/cluster quote template=<name> [options]`: the options override the template's (the
    Slack adapter merges them into a QuoteCommand once the template is read)."""

    template: str
    shape: str | None  # `h100x8` typed before the options, if any
    options: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class TemplateSaveCommand:
    name: str
    cluster_id: str
    team: str | None = None  # None: the person's own; "" with `shared`: their team (or all)


@dataclass(frozen=True)
class TemplateListCommand:
    pass


@dataclass(frozen=True)
class TemplateDeleteCommand:
    name: str


@dataclass(frozen=True)
class ExtendCommand:
    cluster_id: str
    hours: int


@dataclass(frozen=True)
class WithdrawCommand:
    request_id: str


@dataclass(frozen=True)
class WaitCommand:
    request_id: str
    hours: str  # as typed: the stock service checks it against the policy's maximum


@dataclass(frozen=True)
class WaitingCommand:
    pass


@dataclass(frozen=True)
class ConnectCommand:
    cluster_id: str


@dataclass(frozen=True)
class ListCommand:
    page: int = 1  # of LIST_PAGE_SIZE clusters each, oldest first


@dataclass(frozen=True)
class StatusCommand:
    cluster_id: str


@dataclass(frozen=True)
class TerminateCommand:
    cluster_id: str


@dataclass(frozen=True)
class RecoverCommand:
    cluster_id: str


@dataclass(frozen=True)
class AutoRecoverCommand:
    cluster_id: str
    on: bool


@dataclass(frozen=True)
class NotifyCommand:
    cluster_id: str
    channel_id: str  # "" when the channel was typed by name (`channel_name`, to look up)
    channel_name: str | None = None


@dataclass(frozen=True)
class LogsCommand:
    cluster_id: str
    node: int = 0


@dataclass(frozen=True)
class AuditCommand:
    subject_id: str | None = None


@dataclass(frozen=True)
class AuditExportCommand:
    month: str | None = None  # None: this month


@dataclass(frozen=True)
class SpendCommand:
    month: str | None = None
    by: str = "owner"  # owner | project


@dataclass(frozen=True)
class VolumesCommand:
    pass


@dataclass(frozen=True)
class GrowVolumeCommand:
    volume_id: str
    size_gb: int


@dataclass(frozen=True)
class HelpCommand:
    unknown: str | None = None  # the word we didn't understand, if that's why help is shown


Command = (QuoteCommand | ListCommand | StatusCommand | TerminateCommand | RecoverCommand
           | AutoRecoverCommand | NotifyCommand | LogsCommand | AuditCommand | AuditExportCommand
           | SpendCommand | VolumesCommand | GrowVolumeCommand | ExtendCommand | ConnectCommand
           | WithdrawCommand | WaitCommand | WaitingCommand | HelpCommand | TemplateQuoteCommand
           | TemplateSaveCommand | TemplateListCommand | TemplateDeleteCommand)


