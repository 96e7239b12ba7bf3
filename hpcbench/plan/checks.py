"""Value checkers for sweep and profile keys, and the one reader of Slurm time limits.

A checker takes (value, where) and returns the normalised value or raises ConfigError naming
``where`` (``file: dotted.key``) and what is allowed, so a user can fix the file without reading code.
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any

from hpcbench.errors import ConfigError

Checker = Callable[[Any, str], Any]

ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_SIZE_RE = re.compile(r"(\d+)\s*([KMGT]?)(i?B)?", re.IGNORECASE)
_TIME_RE = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d{1,2}))?(?::(\d{1,2}))?")


def fail(where: str, msg: str) -> ConfigError:
    return ConfigError(f"{where}: {msg}")


def typename(v: Any) -> str:
    return {bool: "boolean", int: "integer", float: "float", str: "string", list: "array", dict: "table"}.get(
        type(v), type(v).__name__
    )


def unknown_key(where: str, key: str, valid: Iterable[str]) -> ConfigError:
    valid = sorted(valid)
    close = difflib.get_close_matches(key, valid, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return ConfigError(f"{where}: unknown key (valid keys: {', '.join(valid)}){hint}")


# The largest count Slurm takes (node, task and CPU counts are read as signed 32-bit integers): anything
# larger would be rendered into a job script only for sbatch to refuse it ("not a valid node count").
MAX_COUNT = 2**31 - 1


def integer(minimum: int = 0, maximum: int = MAX_COUNT) -> Checker:
    def check(v: Any, where: str) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise fail(where, f"expected an integer >= {minimum}, got {typename(v)} {v!r}")
        if not minimum <= v <= maximum:
            raise fail(where, f"expected an integer from {minimum} to {maximum}, got {v}")
        return v

    return check


def positive(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
        raise fail(where, f"expected a positive number, got {typename(v)} {v!r}")
    return float(v)


def string(pattern: re.Pattern[str] | None = None, what: str = "") -> Checker:
    def check(v: Any, where: str) -> str:
        if not isinstance(v, str) or not v:
            raise fail(where, f"expected a non-empty string, got {typename(v)} {v!r}")
        # These values land on one line of a job script (#SBATCH, module load, the launcher line):
        # a newline there would start a new shell command, so control characters are refused.
        if _CONTROL_RE.search(v):
            raise fail(where, f"{v!r} contains a newline or control character; write it on one line")
        # fullmatch: '$' in a pattern would let a trailing newline through.
        if pattern is not None and not pattern.fullmatch(v):
            raise fail(where, f"{v!r} is not {what}")
        return v

    return check


def text(v: Any, where: str) -> str:
    if not isinstance(v, str):
        raise fail(where, f"expected a string, got {typename(v)} {v!r}")
    return v


def boolean(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise fail(where, f"expected true or false, got {typename(v)} {v!r}")
    return v


def choice(choices: Iterable[str], noun: str, renamed: dict[str, str] | None = None) -> Checker:
    """One of ``choices``; a name in ``renamed`` (old -> new) still reads, as the new one, with a note."""
    choices, renamed = tuple(choices), renamed or {}

    def check(v: Any, where: str) -> str:
        if isinstance(v, str) and v in renamed:
            print(f"note: {where}: {noun} {v!r} is now called {renamed[v]!r}: write that (the old name still "
                  "reads, with the same point ids)", file=sys.stderr)
            return renamed[v]
        if not isinstance(v, str) or v not in choices:
            shown = repr(v) if isinstance(v, str) else f"{typename(v)} {v!r}"
            raise fail(where, f"unknown {noun} {shown} (choose from: {', '.join(choices)})")
        return v

    return check


def str_list(v: Any, where: str) -> tuple[str, ...]:
    if not isinstance(v, list):
        raise fail(where, f"expected an array of strings, got {typename(v)} {v!r}")
    return tuple(string()(x, f"{where}[{i}]") for i, x in enumerate(v))


def sbatch_args(v: Any, where: str) -> tuple[str, ...]:
    args = str_list(v, where)
    for i, a in enumerate(args):
        if not a.startswith("--"):
            raise fail(f"{where}[{i}]", f"{a!r} is not a long sbatch option (write it as \"--option=value\")")
    return args


def env_name(name: str, where: str) -> str:
    if not ENV_NAME_RE.fullmatch(name):
        raise fail(where, "not a valid environment variable name")
    return name


def env_value(v: Any, where: str) -> str:
    """An environment variable's value ([slurm.env], [matrix.env]): a string or a number, exported quoted."""
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise fail(where, f"expected a string or number, got {typename(v)} {v!r}")
    if "\x00" in str(v):  # a shell cannot carry NUL; newlines and the like are quoted instead
        raise fail(where, "contains a NUL character")
    return str(v)


def env_table(v: Any, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(v, dict):
        raise fail(where, f"expected a table of NAME = \"value\", got {typename(v)}")
    return tuple((env_name(k, f"{where}.{k}"), env_value(val, f"{where}.{k}")) for k, val in v.items())


def gres(v: Any, where: str) -> str:
    v = string()(v, where)
    if "{gpus}" not in v:
        raise fail(where, f"{v!r} has no {{gpus}} placeholder (write it as \"gpu:{{gpus}}\" or \"gpu:a100:{{gpus}}\")")
    return v


def size(v: Any, where: str) -> int:
    """Bytes from an integer or a string such as "64M" or "1G" (binary multiples, as nccl-tests' -b/-e)."""
    if isinstance(v, int) and not isinstance(v, bool) and v >= 1:
        return v
    m = _SIZE_RE.fullmatch(v.strip()) if isinstance(v, str) else None
    if not m or int(m.group(1)) < 1:
        raise fail(where, f"expected a size in bytes such as 8, \"64K\", \"1G\", got {typename(v)} {v!r}")
    return int(m.group(1)) << (10 * " KMGT".index((m.group(2) or " ").upper()))


# --- Slurm time limits: one reader for validation, limits, packing and submitit ----------------------------------
TIME_FORMS = "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS"


def time_seconds(limit: str) -> int:
    """A Slurm time limit in seconds; ValueError for anything Slurm would not read as one."""
    m = _TIME_RE.fullmatch(limit.strip()) if isinstance(limit, str) else None
    if not m:
        raise ValueError(f"{limit!r} is not a Slurm time limit ({TIME_FORMS})")
    days, a, b, c = m.groups()
    parts = [int(x) for x in (a, b, c) if x is not None]
    if days is not None:  # D-HH[:MM[:SS]]
        h, mi, s = (parts + [0, 0])[:3]
        return ((int(days) * 24 + h) * 60 + mi) * 60 + s
    if len(parts) == 1:
        return parts[0] * 60
    if len(parts) == 2:
        return parts[0] * 60 + parts[1]
    return (parts[0] * 60 + parts[1]) * 60 + parts[2]


def time_text(seconds: float) -> str:
    """Seconds as a Slurm time limit D-HH:MM:SS, rounded up to whole minutes (at least one)."""
    minutes = max(1, -(-int(seconds) // 60))
    return f"{minutes // 1440}-{minutes % 1440 // 60:02d}:{minutes % 60:02d}:00"


def slurm_time(v: Any, where: str) -> str:
    v = string()(v, where)
    try:
        time_seconds(v)
    except ValueError:
        raise fail(where, f"{v!r} is not a Slurm time limit ({TIME_FORMS})") from None
    return v
