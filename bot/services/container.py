"""The services a Slack listener can call, bundled (built in bot/app/runtime.py)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass

from bot.clock import Clock
from bot.domain import lanes
from bot.services.approvals import ApprovalService
from bot.services.audit import AuditLog
from bot.services.claims import ButtonClaims
from bot.services.clusters import ClusterQueries
from bot.services.deliveries import Deliveries
from bot.services.duty import DutyService
from bot.services.envelopes import EnvelopeService
from bot.services.extensions import ExtensionService
from bot.services.home import HomeService
from bot.services.launching import LaunchService
from bot.services.people import People
from bot.services.quoting import QuotingService
from bot.services.readiness import ReadinessService
from bot.services.reconciling import ReconcileService
from bot.services.recovery import RecoveryService
from bot.services.stewardship import StewardshipService
from bot.services.stock import StockService
from bot.services.storms import StormService
from bot.services.templates import TemplateService
from bot.services.termination import TerminationService
from bot.services.volumes import VolumeService
from bot.services.watching import WatchService


@dataclass(frozen=True)
class Services:
    clock: Clock
    people: People
    audit: AuditLog
    home: HomeService
    quoting: QuotingService
    approvals: ApprovalService
    launching: LaunchService
    watching: WatchService
    termination: TerminationService
    clusters: ClusterQueries
    recovery: RecoveryService
    stewardship: StewardshipService
    reconciling: ReconcileService
    volumes: VolumeService
    envelopes: EnvelopeService
    claims: ButtonClaims
    deliveries: Deliveries
    extensions: ExtensionService
    templates: TemplateService
    readiness: ReadinessService | None = None
    duty: DutyService | None = None
    storms: StormService | None = None
    stock: StockService | None = None

    def stock_service(self) -> StockService:
        if self.stock is None:
            raise RuntimeError("this bot was built without waiting for stock")
        return self.stock

    def readiness_service(self) -> ReadinessService:
        if self.readiness is None:
            raise RuntimeError("this bot was built without readiness checks")
        return self.readiness

    def duty_service(self) -> DutyService:
        if self.duty is None:
            raise RuntimeError("this bot was built without degraded-duty escalation")
        return self.duty

    def storm_service(self) -> StormService:
        if self.storms is None:
            raise RuntimeError("this bot was built without storm digests")
        return self.storms


def sweeping() -> AbstractContextManager[None]:
    """The lane a sweep runs in (bot/domain/lanes.py): its duties are money's (launches,
    terminations, envelopes, the lease), after the answers a person waits for and before a
    storm's telling — in Slack's turns and the database's (storage/turns.py). What a sweep
    tells of health or reminders says its own lane."""
    return lanes.lane(lanes.Lane.MONEY)
