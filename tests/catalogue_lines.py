"""The shapes of the log lines hpcbench reads, from NVIDIA's sources (NCCL, nccl-tests), ROCm's (RCCL,
rccl-tests) and the network plugins' (aws-ofi-nccl, nccl-rdma-sharp-plugins), as tests/data/catalogue.json
lists them, and the lines a shape prints: its format string filled with its arguments by a printf of the C
conversions the sources use, after the prefix its release prints. Test data: the parser does not read it.

One entry per shape: ``id``, ``tool`` (nccl, nccl-tests, rccl-tests), ``fact``, ``format`` (the format
string as written in the source, C escapes kept; a string-literal concatenation where the source has
one), ``since``/``until`` (first and last release holding it; until null: still in the newest examined),
``source`` (repository@release:file:line), ``feeds`` (the parsed fields it gives; [] for a shape that
carries no fact hpcbench reports), ``printed_as`` (INFO or WARN: after the NCCL prefix of its release;
prefix; alone; name: a network plugin's name, printed by "Using network %s"), ``args`` (the values a
test fills the format with), ``lines`` (when the line holds more than the shape: pieces in order, "$self"
the shape, {"id": ..} another shape), ``expect`` (what the parser reads from those lines), ``example``
and ``notes``. tests/test_logs_catalogue.py prints every shape and checks ``expect``.
"""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

CATALOGUE = Path(__file__).parent / "data" / "catalogue.json"


@functools.lru_cache(maxsize=1)
def shapes() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(CATALOGUE.read_text()))


BY_ID = {s["id"]: s for s in shapes()}
_CONV = re.compile(r"%(?P<flags>[-+ #0]*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?(?:hh|h|ll|l|z|j|t|L)?"
                   r"(?P<conv>[diouxXeEfgGcsp%FT])")
_STRFTIME = {"F": "2025-06-01", "T": "10:15:42"}  # NCCL_DEBUG_TIMESTAMP_FORMAT's default "[%F %T] "
_TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"|STR\((\w+)\)|(\w+)')
_BEFORE = {"INFO": ["prefix-info-v2"], "WARN": ["prefix-warn-v2"], "alone": [], "prefix": [], "name": ["prefix-info-v2"]}


def printf(fmt: str, args: list[Any]) -> str:
    fmt = fmt.encode().decode("unicode_escape")
    args = list(args)
    out, pos = [], 0
    for m in _CONV.finditer(fmt):
        out.append(fmt[pos:m.start()])
        pos = m.end()
        conv = m["conv"]
        if conv == "%" or conv in _STRFTIME:
            out.append(_STRFTIME.get(conv, "%"))
            continue
        width = str(args.pop(0)) if m["width"] == "*" else (m["width"] or "")
        prec = str(args.pop(0)) if m["prec"] == "*" else m["prec"]
        spec = "%" + m["flags"] + width + ("." + prec if prec is not None else "") + {"i": "d", "u": "d", "p": "s"}.get(conv, conv)
        out.append(spec % args.pop(0))
    out.append(fmt[pos:])
    assert not args, f"{len(args)} arguments left over for {fmt!r}"
    return "".join(out)


def expand(fmt: str, values: dict[str, Any]) -> str:
    """A string-literal concatenation ("NCCL version " STR(NCCL_MAJOR) NCCL_SUFFIX ...) with its macros' values."""
    return "".join(m.group(1).encode().decode("unicode_escape") if m.group(1) is not None
                   else str(values[m.group(2) or m.group(3)]) for m in _TOKEN.finditer(fmt))


def render(shape: dict[str, Any], args: Any = None) -> str:
    args = shape["args"] if args is None else args
    if shape["printed_as"] == "name":
        return shape["format"]
    return expand(shape["format"], args) if shape["format"].startswith('"') else printf(shape["format"], args)


def _piece(piece: Any, shape: dict[str, Any]) -> str:
    if piece == "$self":
        return render(shape)
    if isinstance(piece, dict):
        return render(BY_ID[piece["id"]], piece.get("args"))
    return piece


def text(shape: dict[str, Any]) -> str:
    """The log text of the shape: its lines, each ending with a newline."""
    lines = shape.get("lines")
    if lines is None:
        before = [{"id": i} for i in _BEFORE[shape["printed_as"]]]
        body = "Using network " + render(shape) if shape["printed_as"] == "name" else render(shape)
        lines = [[*before, body]]
    return "".join("".join(_piece(p, shape) for p in line).rstrip("\n") + "\n" for line in lines)
