"""hpcbench's own lines in a log: result records (one JSON object per line, or a result.json itself) and the
summary line of what a point measured (workloads/summary.py writes both at the end of a job log)."""

from __future__ import annotations

import json
from typing import Any

from hpcbench.errors import SchemaError
from hpcbench.workloads import summary

MARK = "hpcbench.result/"


class Summaries:
    """The summary lines read (``hpcbench: <label>: 1574.9 samples/s, ...``), in file order: a log may hold
    several points' (job logs concatenated)."""

    MARKS = (summary.MARK,)  # a line without it changes nothing here

    def __init__(self) -> None:
        self.points: list[dict[str, Any]] = []

    def feed(self, text: str) -> None:
        if summary.MARK in text and (got := summary.read(text.strip())) is not None:
            self.points.append(got)

    def result(self) -> list[dict[str, Any]] | None:
        return self.points or None


def _is_result(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("schema"), str) and doc["schema"].startswith(MARK)


def from_line(text: str, warnings: list[str]) -> dict[str, Any] | None:
    start = text.find("{")
    if start < 0:
        return None
    try:
        doc = json.loads(text[start:])
    except ValueError:
        warnings.append(f"a line mentions {MARK} but is not a complete JSON record")
        return None
    return _checked(doc, warnings)


def from_document(data: bytes, warnings: list[str]) -> list[dict[str, Any]]:
    """A whole file that is one JSON record or a list of them (pretty-printed result.json)."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except ValueError:
        return []
    docs = doc if isinstance(doc, list) else [doc]
    return [d for d in (_checked(x, warnings) for x in docs) if d is not None]


def _checked(doc: Any, warnings: list[str]) -> dict[str, Any] | None:
    if not _is_result(doc):
        return None
    from hpcbench import records  # its dataclasses cost 6 ms to declare: only logs with records pay it

    try:
        records.check(doc, records.RESULT, "record")
    except SchemaError as e:
        warnings.append(str(e))
        return None
    return doc
