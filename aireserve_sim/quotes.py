"""The sales desk: catalog stock, quotes and launches (contract §2.1–§2.3, §4.3, §5.6).

A quote prices a shape and locks the rate; a launch turns an open quote into a provisioning
cluster once the money (402) and the capacity (409 capacity_unavailable) are there. Stock is
the config's availability grid plus the overrides set through `/_sim/capacity`.
"""

from __future__ import annotations

from datetime import timedelta

from aireserve_sim.billing import BillingBook
from aireserve_sim.catalog import (
    LOCATIONS,
    ROOT_DISK_DEFAULT_GB,
    ROOT_DISK_MAX_GB,
    ROOT_DISK_MIN_GB,
    price_cluster,
)
from aireserve_sim.lifecycle import Lifecycle
from aireserve_sim.state import ClusterRecord, World
from aireserve_sim.validation import (
    check_range,
    check_repeats,
    check_shape,
    check_workload,
)
from aireserve_sim.volumes import Volumes, check_location, check_volume_size
from bot.reserve.errors import (
    CapacityUnavailable,
    InvalidRequest,
    NotFound,
    PaymentRequired,
    QuoteConsumed,
    QuoteExpired,
)
from bot.reserve.schemas import (
    Availability,
    LaunchRequest,
    PaymentStatus,
    Quote,
    QuoteRequest,
    Shape,
    StorageSpec,
    format_timestamp,
)

# How many nodes of one shape can be placed together, from the stock signal (§11).
_PLACEABLE = {Availability.HIGH: 8, Availability.MEDIUM: 8, Availability.LOW: 2}
_RANK = {Availability.HIGH: 3, Availability.MEDIUM: 2, Availability.LOW: 1}
_LOCATION_ORDER = [loc.id for loc in LOCATIONS]


class QuoteDesk:
    """Stock, quotes and launches."""

    def __init__(self, world: World, *, billing: BillingBook, volumes: Volumes,
                 lifecycle: Lifecycle) -> None:
        self._w = world
        self._billing = billing
        self._volumes = volumes
        self._lifecycle = lifecycle

    # --- stock ---------------------------------------------------------------------------

    def availability(self, accelerator: str, location: str) -> Availability:
        return self._w.availability.get((accelerator, location), Availability.NONE)

    def placeable(self, accelerator: str, location: str) -> int:
        override = self._w.placeable_override.get((accelerator, location))
        if override is not None:
            return override
        return _PLACEABLE.get(self.availability(accelerator, location), 0)

    def _best_location(self, accelerator: str) -> str:
        """Best stock signal for one node; ties go to catalog order."""
        return max(
            _LOCATION_ORDER,
            key=lambda loc: (_RANK.get(self.availability(accelerator, loc), 0),
                             -_LOCATION_ORDER.index(loc)),
        )

    # --- quotes --------------------------------------------------------------------------

    def quote(self, req: QuoteRequest) -> Quote:
        w = self._w
        accelerator = check_shape(req.shape, w.catalog)
        root_gb = req.root_disk_gb if req.root_disk_gb is not None else ROOT_DISK_DEFAULT_GB
        check_range(root_gb, field="rootDiskGb", low=ROOT_DISK_MIN_GB, high=ROOT_DISK_MAX_GB,
                    what="GB per node")
        if req.storage is not None and req.volume_id is not None:
            raise InvalidRequest(
                "Send either storage (a new volume) or volumeId (an existing one), not both: "
                "a cluster mounts at most one volume.",
                details={"field": "volumeId", "reason": "storage_and_volume_id"},
            )
        if req.storage is not None:
            check_volume_size(req.storage.size_gb, field="storage.sizeGb")
        if req.location is not None:
            check_location(req.location)
        volume_gb = req.storage.size_gb if req.storage else None
        location = req.location
        if req.volume_id is not None:
            volume = self._volumes.for_mount(req.volume_id)
            if location is not None and location != volume.location:
                raise InvalidRequest(
                    f"Volume {volume.id} lives in {volume.location}, and a cluster that mounts "
                    f"it is placed there too; location {location} does not match.",
                    details={"field": "location", "reason": "volume_location_mismatch",
                             "volumeLocation": volume.location},
                )
            location, volume_gb = volume.location, volume.size_gb
        if location is None:
            location = self._best_location(accelerator.id)
        rate, breakdown = price_cluster(
            accelerator, gpus_per_node=req.shape.gpus_per_node, nodes=req.shape.nodes,
            root_disk_gb=root_gb, volume_size_gb=volume_gb,
            billing_increment=w.config.billing_increment,
        )
        shape = Shape(accelerator=accelerator.id, gpus_per_node=req.shape.gpus_per_node,
                      nodes=req.shape.nodes)
        quote = Quote(
            id=w.new_id("qte_"),
            shape=shape,
            total_gpus=shape.total_gpus,
            orchestrator=req.orchestrator or "none",
            location=location,
            root_disk_gb=root_gb,
            storage=StorageSpec(size_gb=req.storage.size_gb) if req.storage else None,
            volume_id=req.volume_id,
            rate=rate,
            breakdown=breakdown,
            availability=self.availability(accelerator.id, location),
            created_at=w.now,
            expires_at=w.now + timedelta(seconds=w.config.quote_ttl_seconds),
        )
        w.quotes[quote.id] = quote
        return quote

    def get(self, quote_id: str) -> Quote:
        quote = self._w.quotes.get(quote_id)
        if quote is None:
            raise NotFound(f"No quote {quote_id[:40]!r}.", details={"resource": "quote"})
        return quote

    # --- launch --------------------------------------------------------------------------

    def launch(self, req: LaunchRequest) -> ClusterRecord:
        """Checks in the order of §8's "early rejections", then capacity, then the cluster."""
        w = self._w
        quote = self.get(req.quote_id)
        check_workload(req)
        if quote.launched_cluster_id is not None:
            raise QuoteConsumed(
                f"Quote {quote.id} was already launched as cluster {quote.launched_cluster_id}; "
                "a quote launches once.",
                details={"clusterId": quote.launched_cluster_id},
            )
        if w.now >= quote.expires_at:
            raise QuoteExpired(
                f"Quote {quote.id} expired at {format_timestamp(quote.expires_at)}; re-quote.",
                details={"expiresAt": format_timestamp(quote.expires_at)},
            )
        check_repeats(quote, req)
        hourly = quote.rate.hourly_cents
        past_due = self._billing.account_status() is PaymentStatus.PAST_DUE
        if past_due or w.balance_cents < hourly:
            raise PaymentRequired(
                f"Launching needs the first hour ({hourly} ¢) covered; the balance is "
                f"{w.balance_cents} ¢" + (" and the account is past due." if past_due else "."),
                details={"requiredCents": hourly, "balanceCents": w.balance_cents},
            )
        mounted = self._volumes.for_mount(quote.volume_id) if quote.volume_id else None
        shape = quote.shape
        placeable = self.placeable(shape.accelerator, quote.location)
        if shape.nodes > placeable:
            raise CapacityUnavailable(
                f"Only {placeable} node(s) of {shape.accelerator} can be placed together in "
                f"{quote.location} right now, and the quote needs {shape.nodes}. The quote "
                "stays usable until it expires: retry later, or re-quote elsewhere or smaller.",
                details={"accelerator": shape.accelerator, "location": quote.location,
                         "nodesPlaceable": placeable},
            )
        cluster = self._new_cluster(quote, req)
        if quote.storage is not None:
            volume = self._volumes.create_for_cluster(
                cluster_id=cluster.id, name=req.name, size_gb=quote.storage.size_gb,
                location=quote.location,
            )
            cluster.volume_id = volume.id
        elif mounted is not None:
            self._volumes.attach(mounted, cluster.id)
            cluster.volume_id = mounted.id
        w.quotes[quote.id] = quote.model_copy(update={"launched_cluster_id": cluster.id})
        self._lifecycle.start_provisioning(cluster)
        return cluster

    def _new_cluster(self, quote: Quote, req: LaunchRequest) -> ClusterRecord:
        w = self._w
        seq = w.next_seq()
        cluster = ClusterRecord(
            id=w.new_id("clu_"), seq=seq, quote_id=quote.id, name=req.name, shape=quote.shape,
            orchestrator=quote.orchestrator, location=quote.location, locked_rate=quote.rate,
            created_at=w.now,
            nodes=self._lifecycle.build_nodes(
                cluster_index=len(w.clusters), nodes=quote.shape.nodes,
                gpus=quote.shape.gpus_per_node, orchestrator=quote.orchestrator,
            ),
            image=req.image, docker_start_cmd=req.docker_start_cmd,
            env_keys=sorted(req.env or {}),  # keys only: values may be secrets
            ports=list(req.ports or []), ssh_key_count=len(req.ssh_keys or []),
            volume_id=None, volume_created_with_cluster=quote.storage is not None,
        )
        cluster.recovery.auto = req.recovery.auto if req.recovery else False
        w.clusters[cluster.id] = cluster
        return cluster
