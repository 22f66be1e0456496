"""Reading JSON from a file header or a journal line, strictly: one reader for every file kind.

The network and learned-evaluation files (safetensors headers), opening books, endgame manifests
and match journals all carry JSON that a user may have edited or someone may have crafted. Plain
``json.loads`` turns some of it into tracebacks that name no file (a ``RecursionError`` for
deep nesting, a ``ValueError`` from Python's 4,300-digit integer limit, ``OverflowError`` when a
huge number is later made an int) or into values no writer produces (``NaN``, ``Infinity``,
``1e999``). `parse_json` refuses all of those with one line that names the file and says what is
wrong; the checks of a value's type and range (`int_value`) refuse ``True`` for a count and
``2**200`` for a size. Callers pass the exception class their callers already catch.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 16  # nesting: every header this project writes is 4 levels deep at most
MAX_INT_DIGITS = 24  # 2**64 has 20 digits: no count, offset or size a file holds needs more


class _Refused(Exception):
    """What a parse hook found; turned into the caller's error with the file's name."""


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(f"an integer of {len(text.lstrip('-')):,} digits")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {text[:40]} is out of range")
    return value


def _parse_constant(name: str) -> Any:
    raise _Refused(f"{name} is not strict JSON")


def _depth(value: Any, limit: int) -> int:
    """The nesting depth of parsed JSON (a scalar: 0), counted only up to ``limit + 1``."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            stack.extend((v, depth) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def parse_json(
    data: bytes | bytearray | memoryview | str,
    where: str,
    *,
    max_depth: int = MAX_DEPTH,
    error: type[Exception] = ValueError,
) -> Any:
    """The JSON value of ``data``; ``error("<where>: <why>")`` for anything but strict JSON of
    at most ``max_depth`` levels with integers of at most MAX_INT_DIGITS digits."""
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{where}: not UTF-8 text (byte {e.start})") from None
    try:
        value = json.loads(
            text,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_parse_constant,
        )
    except _Refused as e:
        raise error(f"{where}: {e}") from None
    except RecursionError:
        raise error(
            f"{where}: not valid JSON here (nested deeper than {max_depth} levels)"
        ) from None
    except json.JSONDecodeError as e:
        at = f"line {e.lineno} column {e.colno}"
        raise error(f"{where}: not valid JSON ({e.msg} at {at})") from None
    except ValueError as e:  # what else json.loads raises on its own
        raise error(f"{where}: not valid JSON ({str(e)[:80]})") from None
    if _depth(value, max_depth) > max_depth:
        raise error(f"{where}: not valid JSON here (nested deeper than {max_depth} levels)")
    return value


def parse_object(
    data: bytes | bytearray | memoryview | str,
    where: str,
    *,
    max_depth: int = MAX_DEPTH,
    error: type[Exception] = ValueError,
) -> dict[str, Any]:
    """`parse_json` of a JSON object (a table); anything else is ``error`` naming ``where``."""
    value = parse_json(data, where, max_depth=max_depth, error=error)
    if not isinstance(value, dict):
        raise error(f"{where}: a JSON {type_name(value)}, not an object")
    return value


def type_name(value: Any) -> str:
    """JSON's name for the type of a parsed value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {dict: "object", list: "array", str: "string", int: "integer", float: "number"}.get(
        type(value), type(value).__name__
    )


def int_value(
    value: Any,
    what: str,
    where: str,
    *,
    lo: int,
    hi: int,
    error: type[Exception] = ValueError,
) -> int:
    """``value`` when it is an integer (not a boolean, not a float) in [lo, hi]; else ``error``
    naming ``what`` and ``where``."""
    if type(value) is not int:
        raise error(f"{where}: {what} must be an integer, got a {type_name(value)}")
    if not lo <= value <= hi:
        shown = str(value) if len(str(value)) <= 30 else f"a {len(str(value))}-digit number"
        raise error(f"{where}: {what} is {shown}, outside [{lo}, {hi:,}]")
    return value


def str_value(
    value: Any, what: str, where: str, *, max_len: int, error: type[Exception] = ValueError
) -> str:
    """``value`` when it is a string of at most ``max_len`` characters; else ``error``."""
    if not isinstance(value, str):
        raise error(f"{where}: {what} must be a string, got a {type_name(value)}")
    if len(value) > max_len:
        raise error(f"{where}: {what} is {len(value):,} characters, over {max_len:,}")
    return value
