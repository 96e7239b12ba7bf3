"""The lines a catalogue shape prints (hpcbench/parse/catalogue.json): its format string filled with its
arguments by a printf of the C conversions the sources use, after the prefix its release prints."""
from __future__ import annotations

import re
from typing import Any

from hpcbench.parse.catalogue import shapes

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
