"""Block Kit objects to the dicts Slack receives: exactly what slack_sdk's `to_dict` gives, in a
fraction of its time.

slack_sdk's `JsonObject.to_dict` looks up each object's validators and attributes by reflection
on every call: most of the CPU a message costs (a page of `/cluster list` took ~2.5 ms, on the
event loop). Here both are looked up once per class. Every validator still runs on every object,
so a bad block still fails in its builder, not at Slack. A class that writes its own `to_dict`
(Option, …) is asked for it, as slack_sdk would; ConfirmObject's (one per Terminate button:
half the time of a list page) is mirrored here.

The test suite renders every message both ways and requires them equal (tests/conftest.py turns
`CROSS_CHECK` on), so a slack_sdk upgrade that changes the rules fails loudly, not silently.
"""

from __future__ import annotations

from typing import Any

from slack_sdk.models.basic_objects import (
    EMPTY_ALLOWED_TYPE_AND_PROPERTY_LIST,
    JsonObject,
    _class_validator_names,
)
from slack_sdk.models.blocks import ConfirmObject

CROSS_CHECK = False  # tests: compare every rendering with slack_sdk's own

_EMPTY_ALLOWED = frozenset((e["type"], e["property"]) for e in EMPTY_ALLOWED_TYPE_AND_PROPERTY_LIST)
# Typed as plain objects: compared by identity only (mypy once inferred the methods' types
# differently on a cold cache and failed the zip below).
_GENERIC: tuple[object, ...] = (JsonObject.to_dict, JsonObject.validate_json,
                                JsonObject.get_object_attribute,
                                JsonObject.get_non_null_attributes)

# class → (validator names, attribute names in slack_sdk's order), or None: the class's own to_dict
_plans: dict[type, tuple[tuple[str, ...], tuple[str, ...]] | None] = {}


def render(obj: JsonObject) -> dict[str, Any]:
    """`obj.to_dict()`, validators included."""
    out = _render(obj)
    if CROSS_CHECK:
        assert out == obj.to_dict(), f"{type(obj).__name__}: {out} != {obj.to_dict()}"
    return out


def _render(obj: JsonObject) -> dict[str, Any]:
    cls = type(obj)
    try:
        plan = _plans[cls]
    except KeyError:
        plan = _plans[cls] = _plan(obj)
    if plan is None:
        if isinstance(obj, ConfirmObject) and cls is ConfirmObject:
            return _confirm(obj)
        return {key: _value(value) for key, value in obj.to_dict().items()}
    validators, keys = plan
    for name in validators:
        getattr(obj, name)()
    kind = getattr(obj, "type", None)
    out: dict[str, Any] = {}
    for key in keys:
        value = getattr(obj, key, None)
        if value is None:
            continue
        if (hasattr(value, "__len__") and len(value) == 0
                and (kind, key) not in _EMPTY_ALLOWED):
            continue
        out[key] = _value(value)
    return out


def _confirm(obj: ConfirmObject) -> dict[str, Any]:
    """ConfirmObject.to_dict() for a block (not a legacy attachment action)."""
    for name in sorted(_class_validator_names(ConfirmObject)):
        getattr(obj, name)()
    out: dict[str, Any] = {}
    for key, part in (("title", obj._title), ("text", obj._text), ("confirm", obj._confirm),
                      ("deny", obj._deny)):
        if part:
            out[key] = _render(part)
    if obj._style:
        out["style"] = obj._style
    return out


def _plan(obj: JsonObject) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    cls = type(obj)
    generic: tuple[object, ...] = (cls.to_dict, cls.validate_json, cls.get_object_attribute,
                                   cls.get_non_null_attributes)
    if any(mine is not base for mine, base in zip(generic, _GENERIC, strict=True)):
        return None
    return tuple(sorted(_class_validator_names(cls))), tuple(sorted(obj.attributes))


def _value(value: Any) -> Any:
    """slack_sdk's `to_dict_compatible`."""
    if isinstance(value, (list, tuple)):
        return [_value(v) for v in value]
    if isinstance(value, JsonObject):
        return _render(value)
    to_dict = getattr(value, "to_dict", None)
    if to_dict is not None and callable(to_dict):
        return {key: _value(v) for key, v in to_dict().items()}
    return value
