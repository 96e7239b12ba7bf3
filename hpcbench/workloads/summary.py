"""The lines rank 0 prints at the end of a point's job log: what it measured, for a person, then its result
record as one JSON line, so that a job log copied anywhere still holds its point:

    hpcbench: hvd-gloo-mlp-b16-n2x1: 1574.9 samples/s, 20.32 ms/step over 2 ranks
    hpcbench: hvd-gloo-mlp-b16-n2x1: record {"schema": "hpcbench.result/4", ...}

Written here and read here (``LINE``): hpcbench/parse reads both from any log (parse/own.py, results.py)."""

from __future__ import annotations

import json
import re
from typing import Any

MARK = "hpcbench: "
_NUM = r"(?:\d+(?:\.\d+)?|nan|inf)"
LINE = re.compile(
    r"hpcbench: (?P<label>\S+): (?:"
    rf"(?P<throughput>{_NUM}) samples/s, (?P<step_ms>{_NUM}) ms/step over (?P<ranks>\d+) ranks"
    rf"|(?P<collective>\w+) busbw (?P<busbw>{_NUM}) GB/s at (?P<size>\d+) B, (?P<wrong>\d+) wrong, over (?P<cranks>\d+) ranks"
    r"|unsupported: (?P<unsupported>.+?))\s*$")


def train(throughput: float, step_s: float, world: int) -> str:
    return f"{throughput:.1f} samples/s, {step_s * 1e3:.2f} ms/step over {world} ranks"


def collective(name: str, busbw_gbs: float, size_bytes: int, wrong: int, world: int) -> str:
    return f"{name} busbw {busbw_gbs:.3f} GB/s at {size_bytes} B, {wrong} wrong, over {world} ranks"


def unsupported(reason: str) -> str:
    return f"unsupported: {reason}"


def lines(label: str, summary: str, record: dict[str, Any]) -> list[str]:
    return [f"{MARK}{label}: {summary}", f"{MARK}{label}: record {json.dumps(record, separators=(',', ':'))}"]


def read(text: str) -> dict[str, Any] | None:
    """The facts of a summary line (``text`` without launcher labels); None for any other line."""
    m = LINE.match(text)
    if m is None:
        return None
    out: dict[str, Any] = {"label": m["label"]}
    if m["throughput"] is not None:
        out.update(kind="train", throughput=float(m["throughput"]), unit="samples/s", step_ms=float(m["step_ms"]),
                   ranks=int(m["ranks"]))
    elif m["collective"] is not None:
        out.update(kind="collective", collective=m["collective"], throughput=float(m["busbw"]), unit="GB/s busbw",
                   size_bytes=int(m["size"]), wrong=int(m["wrong"]), ranks=int(m["cranks"]))
    else:
        out.update(kind="unsupported", reason=m["unsupported"])
    return out
