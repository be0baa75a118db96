"""What the quote card adds to the price: the planned run (`hours=`), the docs' advice, and
the alternatives from the catalog with a **Quote this** button each."""

from __future__ import annotations

from slack_sdk.models.blocks import Block

from bot.domain.extension import EXTEND_WHO
from bot.domain.models import Alternative, QuoteInfo, QuoteOutlook
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *
from bot.slack.ids import Action, AlternativeRef

FABRIC = ("The interconnect is private but its fabric (InfiniBand, RDMA, NVLink) is not "
          "guaranteed: deploy through the provider passthrough if you need a specific fabric.")
WEIGHTS = ("No shared volume: a 600 GB–1 TB model takes 35–70 min to download on every launch; "
           "`storage=1000` keeps it for the next launch.")
SHM = ("/dev/shm can't be sized through AI Reserve's cluster API; a workload that needs a larger "
       "shared-memory mount needs a provider-native deployment.")


def planned_cents(hourly_cents: int, hours: int) -> int:
    """What a run of `hours` bills: AI Reserve charges each started hour in full, the first
    when every node is ready — `hours` charges at the locked rate."""
    return hourly_cents * hours


def plan_blocks(q: QuoteInfo) -> list[Block]:
    """`hours=`: the run's total, and what a request from this quote commits to."""
    hours = q.spec.planned_hours
    if hours is None:
        return []
    total = planned_cents(q.hourly_cents, hours)
    days = f" ≈ {hours / 24:.1f} days" if hours >= 24 else ""
    return [section(
        f":spiral_calendar_pad: *Planned: {hours} h{days} → {money(total)}* "
        f"({hours} started hours × {hourly(q.hourly_cents)}; the first is charged when every "
        f"node is ready) · {money(q.daily_cents)} per day\n"
        f"A request from this quote is approved for {hours} h, and the cluster is terminated "
        f"automatically before hour {hours + 1} is charged unless its envelope is extended "
        f"(`/cluster extend {escape('<cluster-id> <hours>')}`; {EXTEND_WHO}).")]


def advice_blocks(q: QuoteInfo) -> list[Block]:
    """The docs' advice, once, briefly: the fabric and /dev/shm always (the card is where every
    reader sees it — a form's hint is not shown everywhere); the weights without a volume."""
    lines = [FABRIC, SHM]
    if q.spec.shape.nodes >= 2 and q.spec.storage_gb is None and not q.spec.volume_id:
        lines.append(WEIGHTS)
    return [context(*lines)]


def stock_blocks(q: QuoteInfo, o: QuoteOutlook) -> list[Block]:
    """Where else this exact shape has stock, with the catalog's GPU price (stocked here)."""
    if q.availability == "none" or not o.stock_elsewhere:
        return []
    where = ", ".join(f"{escaped(loc, ID_MAX)} ({escaped(level, 20)})"
                      for loc, level in o.stock_elsewhere)
    price = (f" at {hourly(o.gpu_hourly_cents)} for the GPUs (the catalog's cluster rate)"
             if o.gpu_hourly_cents is not None else "")
    return [context(f"This shape also has stock in {where}{price}; quote with `location=…`.")]


def alternative_blocks(q: QuoteInfo, o: QuoteOutlook) -> list[Block]:
    """The nearest other accelerators holding the same GPU memory, each with **Quote this**."""
    if not o.alternatives:
        return []
    where = (f" in {escaped(q.location, ID_MAX)}, where volume "
             f"{escaped(q.spec.volume_id, ID_MAX)} lives" if q.spec.volume_id else "")
    blocks: list[Block] = [context(
        f"*Other accelerators with the same GPU memory{where}* "
        f"({q.spec.shape.total_gpus} GPUs here):")]
    blocks.extend(section(_alternative(a), accessory=button(
        "Quote this", action_id=Action.QUOTE_THIS,
        value=AlternativeRef(quote_id=q.id, accelerator=a.accelerator,
                             gpus_per_node=a.gpus_per_node, nodes=a.nodes,
                             location=a.location).pack()))
        for a in o.alternatives)
    return blocks


def _alternative(a: Alternative) -> str:
    return (f"*{a.nodes} × {escaped(a.name, 60)} ×{a.gpus_per_node}* "
            f"({a.memory_gb:,} GB GPU memory) · {hourly(a.gpu_hourly_cents)} for the GPUs · "
            f"stock {escaped(a.availability, 20)} in {escaped(a.location, ID_MAX)}")
