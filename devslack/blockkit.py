"""Block Kit as Slack sees it: validation, the ids Slack fills in, and the values inputs hold.

Validation runs every block through slack_sdk's own models (`Block.parse`, `validate_json()`,
`to_dict()` — the last one recurses into elements, which `validate_json()` alone does not) and
adds the rules the SDK leaves to Slack's servers: block counts per surface, unknown element
types, empty `actions`, plain_text where Slack demands it, unique block_ids and action_ids.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

MESSAGE_BLOCK_LIMIT = 50
VIEW_BLOCK_LIMIT = 100

TEXT_INPUTS = frozenset({"plain_text_input", "number_input", "email_text_input", "url_text_input"})
SINGLE_CHOICE = frozenset({"static_select", "radio_buttons", "overflow", "external_select"})
MULTI_CHOICE = frozenset({"checkboxes", "multi_static_select", "multi_external_select"})
# element type → the key Slack puts its value under in `state.values` / `actions[]`
PICKED = {
    "users_select": "selected_user",
    "multi_users_select": "selected_users",
    "conversations_select": "selected_conversation",
    "multi_conversations_select": "selected_conversations",
    "channels_select": "selected_channel",
    "multi_channels_select": "selected_channels",
    "datepicker": "selected_date",
    "timepicker": "selected_time",
    "datetimepicker": "selected_date_time",
}
FILLABLE = TEXT_INPUTS | SINGLE_CHOICE | MULTI_CHOICE | frozenset(PICKED)
_NOT_INTERACTIVE = frozenset({"image", "plain_text", "mrkdwn"})
_PLAIN_ONLY = (("header", "text"), ("input", "label"), ("input", "hint"))


@dataclass(frozen=True)
class Button:
    """One button found in a message or view, with the block it lives in."""

    block_id: str
    action_id: str
    text: str
    value: str | None = None
    style: str | None = None
    url: str | None = None
    confirm: dict[str, Any] | None = None


def plain(text: object) -> str:
    """The visible string of a text object (or a bare string)."""
    if isinstance(text, dict):
        return str(text.get("text", ""))
    return "" if text is None else str(text)


def elements_of(block: dict[str, Any]) -> list[dict[str, Any]]:
    """The elements a block holds that a user can act on or type into, in display order."""
    kind = block.get("type")
    found: list[Any]
    if kind in ("actions", "context_actions"):
        found = list(block.get("elements") or [])
    elif kind == "section":
        found = [block.get("accessory")]
    elif kind == "input":
        found = [block.get("element")]
    else:
        found = []
    return [e for e in found if isinstance(e, dict) and e.get("type") not in _NOT_INTERACTIVE]


def walk(blocks: Sequence[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Every (block, interactive element) pair of a surface."""
    for block in blocks:
        for element in elements_of(block):
            yield block, element


def buttons(blocks: Sequence[dict[str, Any]]) -> list[Button]:
    """The buttons of a surface, in the order a reader sees them."""
    return [
        Button(
            block_id=str(block.get("block_id", "")),
            action_id=str(element.get("action_id", "")),
            text=plain(element.get("text")),
            value=element.get("value"),
            style=element.get("style"),
            url=element.get("url"),
            confirm=element.get("confirm"),
        )
        for block, element in walk(blocks)
        if element.get("type") == "button"
    ]


# -- validation ---------------------------------------------------------------------------


def block_problems(blocks: object, *, limit: int) -> list[str]:
    """Why Slack would refuse these blocks (empty list: it would not)."""
    if not isinstance(blocks, list):
        return ["blocks must be a JSON array of block objects"]
    problems: list[str] = []
    if len(blocks) > limit:
        problems.append(f"{len(blocks)} blocks: Slack allows at most {limit} on this surface")
    seen: set[str] = set()
    for index, raw in enumerate(blocks):
        if not isinstance(raw, dict):
            problems.append(f"blocks[{index}] is not an object")
            continue
        where = f"blocks[{index}] ({raw.get('type', '?')})"
        problems.extend(f"{where}: {p}" for p in _block_verdict(_canonical(_judged(raw))))
        block_id = raw.get("block_id")
        if block_id is not None:
            if block_id in seen:
                problems.append(f"{where}: duplicate block_id {block_id!r}")
            seen.add(str(block_id))
    return problems


def view_problems(view: object, *, expected_type: str) -> list[str]:
    """Why Slack would refuse this view for a surface of `expected_type` ("modal" / "home")."""
    if not isinstance(view, dict):
        return ["view must be a JSON object"]
    problems: list[str] = []
    if view.get("type") != expected_type:
        problems.append(f"view type must be {expected_type!r}, got {view.get('type')!r}")
    if expected_type == "modal" and not view.get("title"):
        problems.append("a modal needs a title")
    for key in ("title", "submit", "close"):
        text = view.get(key)
        if isinstance(text, dict) and text.get("type") != "plain_text":
            problems.append(f"{key} must be a plain_text object")
    blocks = view.get("blocks")
    if (
        expected_type == "modal"
        and isinstance(blocks, list)
        and any(isinstance(b, dict) and b.get("type") == "input" for b in blocks)
        and not view.get("submit")
    ):
        problems.append("a modal with input blocks needs a submit button")
    problems.extend(_view_verdict(_canonical(_judged_view(view))))
    problems.extend(block_problems(blocks, limit=VIEW_BLOCK_LIMIT))
    return list(dict.fromkeys(problems))  # the SDK and our block pass may say the same thing


# slack_sdk's models take milliseconds per block (a deep copy, parsing, rendering), and a workspace
# sees the same blocks again and again (a card edited in place, a Home published after every
# change): each distinct block or view, as canonical JSON, is judged once per process.
_VERDICTS = 8192


def _canonical(node: object) -> str:
    return json.dumps(node, sort_keys=True, separators=(",", ":"))


# What a verdict depends on, so that the same content is judged once: a block's id only by its
# length (slack_sdk's one rule for it; uniqueness is checked per surface, outside the cache) —
# an App Home's ids change with anything on it, and every block was judged again — and a view
# by its own fields and its number of blocks (each block is judged on its own, above; parsing
# them all into a View again was most of what a Home cost here).
_ANY_BLOCK = {"type": "divider"}


def _judged(block: dict[str, Any]) -> dict[str, Any]:
    block_id = block.get("block_id")
    if not isinstance(block_id, str):
        return block
    return {**block, "block_id": "x" * len(block_id)}


def _judged_view(view: dict[str, Any]) -> dict[str, Any]:
    blocks = view.get("blocks")
    if not isinstance(blocks, list):
        return view
    return {**view, "blocks": [_ANY_BLOCK] * len(blocks)}


@functools.lru_cache(maxsize=_VERDICTS)
def _view_verdict(view_json: str) -> tuple[str, ...]:
    try:
        View(**json.loads(view_json)).validate_json()
    except Exception as exc:  # slack_sdk raises assorted types for bad input
        return (_describe(exc),)
    return ()


@functools.lru_cache(maxsize=_VERDICTS)
def _block_verdict(block_json: str) -> tuple[str, ...]:
    return tuple(_one_block(json.loads(block_json)))


def _one_block(raw: dict[str, Any]) -> list[str]:
    try:
        block = Block.parse(copy.deepcopy(raw))
        if block is None:
            return [f"unknown block type {raw.get('type')!r}"]
        block.validate_json()
        rendered = block.to_dict()  # recursive: validates every element and text object
    except Exception as exc:  # slack_sdk raises assorted types for bad input
        return [_describe(exc)]
    problems: list[str] = []
    if _has_hole(rendered):
        problems.append("an element has an unknown type or is malformed")
    kind = raw.get("type")
    if kind in ("actions", "context") and not raw.get("elements"):
        problems.append(f"a {kind} block needs at least one element")
    if kind == "input" and not (raw.get("label") and raw.get("element")):
        problems.append("an input block needs a label and an element")
    for block_kind, key in _PLAIN_ONLY:
        text = raw.get(key)
        if kind == block_kind and isinstance(text, dict) and text.get("type") != "plain_text":
            problems.append(f"{key} must be a plain_text object")
    action_ids = [e["action_id"] for e in elements_of(raw) if e.get("action_id")]
    repeated = sorted({a for a in action_ids if action_ids.count(a) > 1})
    problems.extend(f"duplicate action_id {a!r}" for a in repeated)
    return problems


def _has_hole(node: object) -> bool:
    """slack_sdk turns an element it cannot parse into None inside its list."""
    if isinstance(node, list):
        return any(item is None or _has_hole(item) for item in node)
    if isinstance(node, dict):
        return any(_has_hole(item) for item in node.values())
    return False


def _describe(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


# -- what Slack fills in --------------------------------------------------------------------


def with_ids(blocks: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of `blocks` with the block_id / action_id Slack invents when a builder omits them."""
    filled = copy.deepcopy(list(blocks))
    for index, block in enumerate(filled):
        block.setdefault("block_id", _short_id(index, block))
        for position, element in enumerate(elements_of(block)):
            element.setdefault("action_id", _short_id(position, element))
    return filled


def _short_id(index: int, node: dict[str, Any]) -> str:
    digest = hashlib.sha1(f"{index}:{json.dumps(node, sort_keys=True)}".encode()).hexdigest()
    return digest[:5]


# -- the values inputs hold -----------------------------------------------------------------


def options_of(element: dict[str, Any]) -> list[dict[str, Any]]:
    """An element's options, flattening option_groups."""
    options = list(element.get("options") or [])
    for group in element.get("option_groups") or []:
        options.extend(group.get("options") or [])
    return [o for o in options if isinstance(o, dict)]


def initial_value(element: dict[str, Any]) -> Any:
    """What the element shows before anyone touches it, as a plain value (str, list or None)."""
    kind = element.get("type")
    if kind in TEXT_INPUTS:
        return element.get("initial_value")
    if kind in SINGLE_CHOICE:
        option = element.get("initial_option")
        return option.get("value") if isinstance(option, dict) else None
    if kind in MULTI_CHOICE:
        return [o.get("value") for o in element.get("initial_options") or []]
    if kind in PICKED:
        suffix = PICKED[str(kind)].removeprefix("selected_")
        return element.get(f"initial_{suffix}")
    return None


def state_entry(element: dict[str, Any], value: Any) -> dict[str, Any]:
    """The `state.values[block_id][action_id]` object Slack sends for `value` in `element`.

    `value` is a plain value: a string for text inputs, the option *value* (or the option
    object) for selects, a list of those for multi-selects and checkboxes.
    """
    kind = str(element.get("type"))
    if kind in TEXT_INPUTS:
        return {"type": kind, "value": None if value is None else str(value)}
    if kind in SINGLE_CHOICE:
        return {"type": kind, "selected_option": _option(element, value)}
    if kind in MULTI_CHOICE:
        chosen = [] if value is None else value if isinstance(value, list) else [value]
        return {"type": kind, "selected_options": [_option(element, v) for v in chosen]}
    if kind in PICKED:
        return {"type": kind, PICKED[kind]: value}
    raise ValueError(f"devslack cannot fill a {kind!r} element")


def _option(element: dict[str, Any], value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    wanted = value.get("value") if isinstance(value, dict) else str(value)
    for option in options_of(element):
        if option.get("value") == wanted:
            return option
    known = [o.get("value") for o in options_of(element)]
    raise ValueError(f"{wanted!r} is not an option of {element.get('action_id')!r}: {known}")


def initial_state(blocks: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """`state.values` of a surface nobody has typed into yet (input blocks only, like Slack)."""
    values: dict[str, dict[str, dict[str, Any]]] = {}
    for block, element in walk(blocks):
        if block.get("type") != "input" or element.get("type") not in FILLABLE:
            continue
        entry = state_entry(element, initial_value(element))
        values.setdefault(str(block.get("block_id")), {})[str(element.get("action_id"))] = entry
    return values


def typed_state(
    blocks: list[dict[str, Any]], values: Mapping[str, Mapping[str, Any]] | None
) -> dict[str, dict[str, dict[str, Any]]]:
    """`state.values` of a surface with `values` typed into its inputs, the rest as they
    started."""
    state = initial_state(blocks)
    for block_id, by_action in (values or {}).items():
        for action_id, typed in by_action.items():
            element = input_element(blocks, block_id, action_id)
            state.setdefault(block_id, {})[action_id] = state_entry(element, typed)
    return state


def action_entry(
    blocks: list[dict[str, Any]], action_id: str, block_id: str | None, value: Any, ts: str
) -> dict[str, Any]:
    """The `actions[]` entry of a block_actions payload: a click on (or pick in) `action_id`."""
    for block, element in walk(blocks):
        if element.get("action_id") != action_id or block_id not in (None, block.get("block_id")):
            continue
        action: dict[str, Any] = {
            "action_id": action_id,
            "block_id": block.get("block_id"),
            "action_ts": ts,
        }
        if element.get("type") == "button":
            action.update(type="button", text=element.get("text"))
            chosen = element.get("value") if value is None else value
            if chosen is not None:
                action["value"] = chosen
            if element.get("style"):
                action["style"] = element["style"]
            return action
        picked = initial_value(element) if value is None else value
        return {**action, **state_entry(element, picked)}
    known = [e.get("action_id") for _, e in walk(blocks)]
    raise ValueError(f"no element with action_id {action_id!r} here; there are {known}")


def input_element(blocks: list[dict[str, Any]], block_id: str, action_id: str) -> dict[str, Any]:
    """The element a submission value for `block_id` / `action_id` belongs to."""
    for block, element in walk(blocks):
        if block.get("block_id") == block_id and element.get("action_id") == action_id:
            return element
    known = {b.get("block_id"): e.get("action_id") for b, e in walk(blocks)}
    raise ValueError(f"no input {block_id!r}/{action_id!r} in this view; there are {known}")
