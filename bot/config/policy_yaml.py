"""Reading a hand-edited YAML file node by node, every problem with its line.

The primitives the spend policy file (bot/config/policy_file.py) is read with: a value and the
line it came from, a mapping whose unknown keys are named (with the nearest known one), money in
cents, whole numbers in a range, Slack ids. Problems are collected, not raised, so a file with five
mistakes is answered with five lines at once.
"""

from __future__ import annotations

import difflib
import re
from decimal import Decimal

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

USER = (re.compile(r"^[UW][A-Z0-9]{2,}$"), "user id (like U012ABCDEF)")
CHANNEL = (re.compile(r"^[CG][A-Z0-9]{2,}$"), "channel id (like C012ABCDEF)")
GROUP = (re.compile(r"^S[A-Z0-9]{2,}$"), "user group id (like S012ABCDEF)")

Entries = dict[str, tuple[Node, Node]]  # key → (key node, value node), nulls left out


class YamlReader:
    """Walks the composed YAML, collecting every problem instead of stopping at the first."""

    def __init__(self) -> None:
        self.problems: list[tuple[int, str]] = []  # (line, what is wrong)
        self._constructor = SafeConstructor()

    def problem(self, node: Node, text: str) -> None:
        self.problems.append((node.start_mark.line + 1, text))

    def value(self, node: Node) -> object:
        """A scalar's Python value, typed by YAML (8 int, 8.5 float, yes bool, ~ None); a list
        or mapping stays a node."""
        if not isinstance(node, ScalarNode):
            return node
        try:
            return self._constructor.construct_object(node, deep=True)
        except yaml.YAMLError:
            return node  # an unsupported tag (!!python/…): reported as a wrong type

    def mapping(self, node: Node | None, path: str, allowed: frozenset[str] | None) -> Entries:
        """A mapping's keys, with unknown (typos: the closest key is suggested) and duplicate
        keys reported. Absent (None) reads as empty."""
        if node is None:
            return {}
        if not isinstance(node, MappingNode):
            self.problem(node, f"{path} must be a mapping of keys, not {self.describe(node)}")
            return {}
        found: Entries = {}
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = self.value(key_node)
            if not isinstance(key, str) or not key:
                self.problem(key_node, f"{path} has a key that is not a name: "
                                       f"{self.describe(key_node)}")
                continue
            full = f"{path}.{key}" if path != "the policy" else key
            if key in seen:
                self.problem(key_node, f"duplicate key {full}")
            elif allowed is not None and key not in allowed:
                close = difflib.get_close_matches(key, sorted(allowed), n=1)
                hint = f"did you mean {close[0]}?" if close else "known: " + ", ".join(
                    sorted(allowed))
                self.problem(key_node, f"unknown key {full} ({hint})")
            elif self.value(value_node) is not None:
                found[key] = (key_node, value_node)
            seen.add(key)
        return found

    def describe(self, node: Node) -> str:
        value = self.value(node)
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, str):
            return repr(value)
        if isinstance(value, int | float):
            return f"the number {value}"
        if isinstance(value, SequenceNode):
            return "a list"
        if isinstance(value, MappingNode):
            return "a mapping"
        return f"a value tagged {node.tag}"

    def cents(self, node: Node, path: str) -> int | None:
        """Dollars with at most 2 decimals → integer cents."""
        value = self.value(node)
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.problem(node, f"{path} must be an amount in dollars like 20 or 20.50, "
                               f"not {self.describe(node)}")
            return None
        # repr() is the shortest text that round-trips: 20.005 stays 20.005, not a binary tail.
        amount = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
        if not amount.is_finite():
            self.problem(node, f"{path} must be an amount in dollars, not {value}")
        elif amount < 0:
            self.problem(node, f"{path} must not be negative ({value})")
        elif (amount * 100) != (amount * 100).to_integral_value():
            self.problem(node, f"{path} has more than 2 decimals ({value}): money is in cents")
        else:
            return int(amount * 100)
        return None

    def whole(self, node: Node, path: str, low: int, high: int | None) -> int | None:
        value = self.value(node)
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(node, f"{path} must be a whole number, not {self.describe(node)}")
        elif high is not None and not low <= value <= high:
            self.problem(node, f"{path} must be between {low} and {high} (the provider's "
                               f"self-serve range), not {value}")
        elif value < low:
            self.problem(node, f"{path} must be at least {low}, not {value}")
        else:
            return value
        return None

    def slack_id(self, node: Node, path: str, kind: tuple[re.Pattern[str], str]) -> str | None:
        value = self.value(node)
        if isinstance(value, str) and kind[0].match(value):
            return value
        self.problem(node, f"{path}: {self.describe(node)} is not a Slack {kind[1]}")
        return None

    def items(self, node: Node, path: str, example: str) -> list[Node]:
        if isinstance(node, SequenceNode):
            return list(node.value)
        self.problem(node, f"{path} must be a list like {example}, not {self.describe(node)}")
        return []

    def user_ids(self, node: Node, path: str) -> frozenset[str]:
        ids = (self.slack_id(item, path, USER) for item in self.items(node, path, "[U012ABCDEF]"))
        return frozenset(i for i in ids if i is not None)

    # --- the sections -------------------------------------------------------------------------


def entry(entries: Entries, key: str) -> Node | None:
    return entries[key][1] if key in entries else None
