"""The spend policy file (YAML): read it, check every line, build a `Policy`.

People edit this file by hand, so every mistake is reported with its line — a typo'd key, a
wrong type, a third decimal, an id that is not a Slack id — all at once, before the bot starts.
The YAML is composed (not loaded) so each value keeps the node it came from, and the node its
line. A key that is absent and a key left empty (`group:`) both mean "not set".
policy.example.yaml at the repository root documents every key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

from bot.config.policy_yaml import CHANNEL, GROUP, USER, Entries, YamlReader, entry
from bot.domain.idle import MAX_MINUTES, MIN_MINUTES, done_pattern
from bot.domain.patterns import problem
from bot.domain.places import Policies
from bot.domain.policy import Policy, Project, money
from bot.domain.spend import Team

# The provider's self-serve range [docs]: a policy can narrow it, not widen it.
MIN_NODES, MAX_NODES = 2, 8

# What an installation's own policy may set: everything but `installations` itself.
_PLACED = frozenset({"approvals_channel", "approvers", "admins", "approval", "budgets", "limits",
                     "overrides", "requesters", "allow_guests", "degraded", "projects", "idle"})
_TOP = _PLACED | {"installations"}
_PLACE_KEY = re.compile(r"^[TE][A-Z0-9]{2,}$")  # a workspace (T…) or an organization (E…)
_PROJECT = frozenset({"monthly_budget"})
_PROJECT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")
_APPROVERS = frozenset({"users", "group"})
_REQUESTERS = frozenset({"users", "groups"})
_APPROVAL = frozenset({"auto_approve_below", "one_approver_up_to"})
_BUDGETS = frozenset({"default_user", "users", "teams"})
_TEAM = frozenset({"members", "monthly"})
_DEGRADED = frozenset({"escalate_to", "escalate_after_minutes"})
# How long a degraded cluster may wait for someone before the bot escalates: a day at most.
ESCALATE_MINUTES = (1, 1440)
_LIMITS = frozenset({"accelerators", "max_nodes", "max_lifetime_hours", "enforce_lifetime",
                     "max_stock_wait_hours"})
_IDLE = frozenset({"after_minutes", "every_rank", "done", "terminate_after_minutes",
                   "keep_hours"})



class PolicyError(Exception):
    """The policy file cannot be used; `problems` has one "file:line: what is wrong" per mistake."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def load_policy(path: Path) -> Policy:
    """The top level of the policy file at `path` (every installation's checked too)."""
    return load_policies(path).default


def load_policies(path: Path) -> Policies:
    """Read and check the policy file at `path`; raises PolicyError listing every problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise PolicyError([f"{path}:1: the policy file is not UTF-8 text"]) from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise PolicyError([f"{path}: cannot read the policy file ({reason})"]) from None
    return parse_policies(text, name=str(path))


def load_policies_or_default(path: Path | None, *, approvers: Iterable[str],
                             approvals_channel: str | None) -> Policies:
    """The file if one is configured, else today's behaviour (APPROVERS / APPROVALS_CHANNEL);
    APPROVALS_CHANNEL wherever the file names no approvals channel."""
    if path is None:
        return Policies(default=Policy.simple(approvers=approvers,
                                              approvals_channel=approvals_channel))
    return load_policies(path).with_channel(approvals_channel)


def parse_policy(text: str, *, name: str = "policy.yaml") -> Policy:
    """The top level of a policy file's text (every installation's checked too)."""
    return parse_policies(text, name=name).default


def parse_policies(text: str, *, name: str = "policy.yaml") -> Policies:
    """Check the text of a policy file; `name` starts every problem line."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise PolicyError([f"{name}:{line}: not valid YAML: {exc.problem or exc.context}"]
                          ) from None
    except yaml.YAMLError as exc:
        raise PolicyError([f"{name}:1: not valid YAML: {exc}"]) from None
    reader = _Reader()
    policy = reader.policy(root)
    places = reader.places(root) if policy is not None else {}
    if reader.problems or policy is None:
        # In file order, whatever order the sections were checked in.
        raise PolicyError([f"{name}:{line}: {text}" for line, text in sorted(reader.problems,
                                                                            key=lambda p: p[0])])
    return Policies(default=policy, places=places)


class _Reader(YamlReader):
    """Walks the composed YAML, collecting every problem instead of stopping at the first."""

    def policy(self, root: Node | None, allowed: frozenset[str] = _TOP) -> Policy | None:
        if root is None or self.value(root) is None:
            self.problems.append((1, "the policy file is empty; it needs at least approvers"))
            return None
        if not isinstance(root, MappingNode):
            self.problem(root, f"the policy must be a mapping of keys, not {self.describe(root)}")
            return None
        top = self.mapping(root, "the policy", allowed)
        channel = None
        if "approvals_channel" in top:
            channel = self.slack_id(top["approvals_channel"][1], "approvals_channel", CHANNEL)
        users, group = self.approvers(root, top)
        admins = self.user_ids(top["admins"][1], "admins") if "admins" in top else frozenset()
        auto, one = self.approval(self.mapping(entry(top, "approval"), "approval", _APPROVAL))
        default, per_user, teams = self.budgets(
            self.mapping(entry(top, "budgets"), "budgets", _BUDGETS))
        limits = self.mapping(entry(top, "limits"), "limits", _LIMITS)
        lifetime = self.limit(limits, "max_lifetime_hours", 1, None)
        return Policy(
            approvals_channel=channel, approver_ids=users, approver_group=group, admin_ids=admins,
            auto_approve_below_cents=auto, one_approver_up_to_cents=one,
            default_user_budget_cents=default, user_budget_cents=per_user, teams=teams,
            allowed_accelerators=self.accelerators(limits),
            max_nodes=self.limit(limits, "max_nodes", MIN_NODES, MAX_NODES),
            max_lifetime_hours=lifetime, enforce_lifetime=self.enforce(limits, lifetime),
            **({"max_stock_wait_hours": wait} if (wait := self.limit(
                limits, "max_stock_wait_hours", 1, 24 * 30)) is not None else {}),
            overrides_by_admins=self.overrides(top, admins),
            projects=self.projects(entry(top, "projects")),
            **self.requesters(top),
            **self.degraded(self.mapping(entry(top, "degraded"), "degraded", _DEGRADED)),
            **self.idle(self.mapping(entry(top, "idle"), "idle", _IDLE)),
        )

    def places(self, root: Node | None) -> dict[str, Policy]:
        """`installations:` T…/E… → that workspace's or organization's own policy: the top level
        with each section the entry lists replacing the top level's. A problem is said once, at
        its line, and one inside an entry names the entry."""
        if not isinstance(root, MappingNode):
            return {}
        top = [(k, v) for k, v in root.value if self.value(k) != "installations"]
        given = next((v for k, v in root.value if self.value(k) == "installations"), None)
        found: dict[str, Policy] = {}
        for key, (key_node, node) in self.mapping(given, "installations", None).items():
            if not _PLACE_KEY.match(key):
                self.problem(key_node, f"installations: {key!r} is not a Slack workspace id "
                                       "(like T012ABCDEF) or organization id (like E012ABCDEF)")
                continue
            if not isinstance(node, MappingNode) or not node.value:
                what = "an empty one" if isinstance(node, MappingNode) else self.describe(node)
                self.problem(node, f"installations.{key} must be a mapping of the policy's keys "
                                   f"(approvals_channel, approvers, …), not {what}")
                continue
            own = {self.value(k) for k, _ in node.value}
            merged = MappingNode(node.tag, [*((k, v) for k, v in top if self.value(k) not in own),
                                            *node.value], start_mark=node.start_mark,
                                 end_mark=node.end_mark)
            before, lines = len(self.problems), _lines(node)
            policy = self.policy(merged, _PLACED)
            # The top level's own problems are said once, already; the entry's name the entry.
            self.problems[before:] = [(line, f"installations.{key}: {text}")
                                      for line, text in self.problems[before:] if line in lines]
            if policy is not None:
                found[key] = policy
        return found

    def degraded(self, section: Entries) -> dict[str, object]:
        """`degraded`: whom a degraded cluster nobody acts on is escalated to, and when."""
        found: dict[str, object] = {}
        if "escalate_to" in section:
            node = section["escalate_to"][1]
            value = self.value(node)
            if isinstance(value, str) and (GROUP[0].match(value) or CHANNEL[0].match(value)):
                found["escalate_to"] = value
            else:
                self.problem(node, f"degraded.escalate_to: {self.describe(node)} is not a Slack "
                                   f"{GROUP[1]} or {CHANNEL[1]}")
        if "escalate_after_minutes" in section:
            key, node = section["escalate_after_minutes"]
            low, high = ESCALATE_MINUTES
            value = self.value(node)
            if isinstance(value, bool) or not isinstance(value, int):
                self.problem(node, "degraded.escalate_after_minutes must be a whole number of "
                                   f"minutes, not {self.describe(node)}")
            elif not low <= value <= high:
                self.problem(node, f"degraded.escalate_after_minutes must be between {low} and "
                                   f"{high} minutes, not {value}")
            else:
                found["escalate_after_minutes"] = value
            if "escalate_to" not in section:
                self.problem(key, "degraded.escalate_after_minutes needs degraded.escalate_to "
                                  "(a user group or channel to escalate to)")
        return found

    def projects(self, node: Node | None) -> tuple[Project, ...]:
        """`projects:` name → `{monthly_budget: dollars}` (or `{}`: listed, no budget)."""
        found = []
        for name, (key, value) in self.mapping(node, "projects", None).items():
            if not _PROJECT_NAME.match(name):
                self.problem(key, f"project {name!r}: a name of letters, digits, - and _ "
                                  "(at most 40)")
                continue
            fields = self.mapping(value, f"projects.{name}", _PROJECT)
            monthly = (self.cents(fields["monthly_budget"][1], f"projects.{name}.monthly_budget")
                       if "monthly_budget" in fields else None)
            found.append(Project(name=name, monthly_cents=monthly))
        return tuple(found)

    def idle(self, section: Entries) -> dict[str, object]:
        """`idle:` the launch form's idle rule by default (after_minutes, every_rank, done) and
        what happens once it fires (terminate_after_minutes, keep_hours) — bot/domain/idle.py."""
        found: dict[str, object] = {}
        for key, field, low, high in (
                ("after_minutes", "idle_after_minutes", MIN_MINUTES, MAX_MINUTES),
                ("terminate_after_minutes", "idle_terminate_after_minutes", 0, MAX_MINUTES),
                ("keep_hours", "idle_keep_hours", 1, 168)):
            if key not in section:
                continue
            node = section[key][1]
            value = self.value(node)
            if isinstance(value, bool) or not isinstance(value, int) or \
                    not low <= value <= high:
                self.problem(node, f"idle.{key} must be a whole number from {low} to {high}, "
                                   f"not {self.describe(node)}")
            else:
                found[field] = value
        if "every_rank" in section:
            node = section["every_rank"][1]
            if isinstance(value := self.value(node), bool):
                found["idle_every_rank"] = value
            else:
                self.problem(node, f"idle.every_rank must be true or false, not "
                                   f"{self.describe(node)}")
        if "done" in section:
            node = section["done"][1]
            text = self.value(node)
            pattern = done_pattern(text) if isinstance(text, str) else None
            why = problem(pattern) if pattern is not None else "it must be a preset or a pattern"
            if why is not None:
                self.problem(node, f"idle.done: {why}")
            else:
                found["idle_done"] = pattern
        return found

    def requesters(self, top: Entries) -> dict[str, object]:
        """Who may spend: `requesters` (users, groups; absent: everyone) and `allow_guests`."""
        found: dict[str, object] = {}
        if "requesters" in top:
            node, before = top["requesters"][1], len(self.problems)
            section = self.mapping(node, "requesters", _REQUESTERS)
            if "users" in section:
                found["requester_ids"] = self.user_ids(section["users"][1], "requesters.users")
            if "groups" in section:
                groups = [self.slack_id(item, "requesters.groups", GROUP) for item in
                          self.items(section["groups"][1], "requesters.groups", "[S012ABCDEF]")]
                found["requester_groups"] = frozenset(g for g in groups if g)
            if len(self.problems) == before and not found.get("requester_ids") \
                    and not found.get("requester_groups"):
                self.problem(node, "requesters lists nobody: list users or groups, or remove it "
                                   "to let everyone request")
        if "allow_guests" in top:
            node = top["allow_guests"][1]
            value = self.value(node)
            if isinstance(value, bool):
                found["allow_guests"] = value
            else:
                self.problem(node, f"allow_guests must be true or false, not "
                                   f"{self.describe(node)}")
        return found

    def approvers(self, root: Node, top: Entries) -> tuple[frozenset[str], str | None]:
        before = len(self.problems)
        section = self.mapping(entry(top, "approvers"), "approvers", _APPROVERS)
        users = self.user_ids(section["users"][1], "approvers.users") \
            if "users" in section else frozenset()
        group = self.slack_id(section["group"][1], "approvers.group", GROUP) \
            if "group" in section else None
        if not users and group is None and len(self.problems) == before:
            self.problem(entry(top, "approvers") or root,
                         "approvers must list users or a group: someone has to approve")
        return users, group

    def approval(self, section: Entries) -> tuple[int | None, int | None]:
        auto = one = None
        if "auto_approve_below" in section:
            auto = self.cents(section["auto_approve_below"][1], "approval.auto_approve_below")
        if "one_approver_up_to" in section:
            node = section["one_approver_up_to"][1]
            one = self.cents(node, "approval.one_approver_up_to")
            if one is not None and auto is not None and one <= auto:
                self.problem(node, "approval.one_approver_up_to must be above auto_approve_below "
                                   f"({money(one)} is not above {money(auto)})")
        return auto, one

    def budgets(self, section: Entries) -> tuple[int | None, dict[str, int], tuple[Team, ...]]:
        default = None
        if "default_user" in section:
            default = self.cents(section["default_user"][1], "budgets.default_user")
        per_user: dict[str, int] = {}
        for user, (key, node) in self.mapping(entry(section, "users"), "budgets.users",
                                              None).items():
            cents = self.cents(node, f"budgets.users.{user}")
            if self.slack_id(key, "budgets.users", USER) and cents is not None:
                per_user[user] = cents
        teams = []
        for name, (key, node) in self.mapping(entry(section, "teams"), "budgets.teams",
                                              None).items():
            team = self.team(name, key, node)
            if team is not None:
                teams.append(team)
        return default, per_user, tuple(teams)

    def team(self, name: str, key: Node, node: Node) -> Team | None:
        path = f"budgets.teams.{name}"
        fields = self.mapping(node, path, _TEAM)
        if not isinstance(node, MappingNode):
            return None
        members: frozenset[str] = frozenset()
        if "members" not in fields:
            self.problem(key, f"team {name} has no members: list them in {path}.members")
        else:
            members = self.user_ids(fields["members"][1], f"{path}.members")
            if isinstance(fields["members"][1], SequenceNode) and not fields["members"][1].value:
                self.problem(fields["members"][1], f"team {name} has no members: list them in "
                                                   f"{path}.members")
        monthly = self.cents(fields["monthly"][1], f"{path}.monthly") \
            if "monthly" in fields else None
        if "monthly" not in fields:
            self.problem(key, f"team {name} has no budget: set {path}.monthly (dollars)")
        if not members or monthly is None:
            return None
        return Team(name=name, members=members, monthly_cents=monthly)

    def limit(self, limits: Entries, key: str, low: int, high: int | None) -> int | None:
        return self.whole(limits[key][1], f"limits.{key}", low, high) if key in limits else None

    def accelerators(self, limits: Entries) -> frozenset[str] | None:
        if "accelerators" not in limits:
            return None
        node, found = limits["accelerators"][1], set()
        for item in self.items(node, "limits.accelerators", "[h100, h200]"):
            value = self.value(item)
            if isinstance(value, str) and value.strip():
                found.add(value.strip().lower())
            else:
                self.problem(item, f"limits.accelerators: {self.describe(item)} is not an "
                                   "accelerator name")
        if isinstance(node, SequenceNode) and not node.value:
            self.problem(node, "limits.accelerators is empty: remove it to allow every "
                               "accelerator")
        return frozenset(found) or None

    def enforce(self, limits: Entries, lifetime: int | None) -> bool:
        if "enforce_lifetime" not in limits:
            return False
        node = limits["enforce_lifetime"][1]
        value = self.value(node)
        if not isinstance(value, bool):
            self.problem(node, f"limits.enforce_lifetime must be true or false, not "
                               f"{self.describe(node)}")
            return False
        if value and lifetime is None and "max_lifetime_hours" not in limits:
            self.problem(node, "limits.enforce_lifetime needs limits.max_lifetime_hours")
        return value

    def overrides(self, top: Entries, admins: frozenset[str]) -> bool:
        if "overrides" not in top:
            return False  # the safe default: a broken rule is refused
        node = top["overrides"][1]
        value = self.value(node)
        if value not in ("admins", "none"):
            self.problem(node, f"overrides must be admins or none, not {self.describe(node)}")
            return False
        if value == "admins" and "admins" not in top:
            self.problem(node, "overrides is admins but no admins are listed: add admins, or "
                               "set overrides: none")
        elif value == "admins" and isinstance(top["admins"][1], SequenceNode) \
                and not top["admins"][1].value:
            self.problem(top["admins"][1], "admins is empty but overrides is admins: list at "
                                           "least one admin, or set overrides: none")
        return value == "admins"


def _lines(node: Node) -> set[int]:
    """The lines `node` and everything inside it start on."""
    found = {node.start_mark.line + 1}
    if isinstance(node, MappingNode):
        for key, value in node.value:
            found |= _lines(key) | _lines(value)
    elif isinstance(node, SequenceNode):
        for item in node.value:
            found |= _lines(item)
    return found
