"""nccl-tests (and rccl-tests, and hpcbench's own allreduce) result tables.

Handles: headers with or without ``redop``/``root`` and ``#wrong`` vs ``error``; headers that lost
their ``#`` in a web paste; tables with no header at all (inferred from the row shape); duplicated
headers and rows interleaved from two processes (rows are kept in file order, the largest size is
looked up, not assumed last); NCCL INFO lines inside the table; a following test's command line.
"""

from __future__ import annotations

import re
from typing import Any

RANK_LINE = re.compile(r"Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+([\w.-]+)\s+device")
AVG = re.compile(r"Avg bus bandwidth\s*:\s*([-+\d.eE]+|nan|inf)")
TEST_NAME = re.compile(r"(?:^|[\s/])((?:all_reduce|all_gather|allgather|reduce_scatter|reduce|broadcast|alltoall|"
                       r"sendrecv|scatter|gather|hypercube|all_reduce_bench)_perf)\b")
STARTING = re.compile(r"Collective test (starting|concluded):\s*(\w+)")
TYPES = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16",
         "f8e4m3", "f8e5m2", "fp8_e4m3", "fp8_e5m2", "char", "int", "float16", "float32", "float64", "fp16",
         "fp32", "fp64", "bf16"}
REDOPS = {"sum", "prod", "max", "min", "avg", "premulsum", "mulsum", "none"}
_NUM = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")


def _wrong(tok: str) -> int | float | str:
    try:
        return int(tok)
    except ValueError:
        try:
            return float(tok)
        except ValueError:
            return tok


class NcclTestsState:
    def __init__(self) -> None:
        self.header: list[str] | None = None
        self.rows: list[dict[str, Any]] = []
        self.avg: float | None = None
        self.collective: str | None = None
        self.pending: str | None = None  # named by a command line or 'starting' before the table
        self.wrong_column: str | None = None
        self.has_redop: bool | None = None
        self.has_root: bool | None = None
        self.hosts: set[str] = set()
        self.rank_hosts: dict[int, str] = {}
        self.seen = False
        self.bad_rows = 0

    def feed(self, text: str) -> None:
        s = text.strip()
        if not s:
            return
        body = s.lstrip("#").strip()
        if "Rank" in body and " on " in body:
            m = RANK_LINE.search(body)
            if m:
                self.hosts.add(m.group(2))
                self.rank_hosts[int(m.group(1))] = m.group(2)
                return
        if "Avg bus bandwidth" in body:
            m = AVG.search(body)
            if m and self.avg is None:
                try:
                    self.avg = float(m.group(1))
                except ValueError:
                    pass
            self.seen = True
            self._close()
            return
        if "Collective test" in body:
            m = STARTING.search(body)
            if m:
                name = m.group(2).removesuffix("_perf")
                if m.group(1) == "concluded":
                    if self.collective is None and (self.rows or self.seen):
                        self.collective = name
                else:
                    self.pending = name
                return
        if "_perf" in body:
            m = TEST_NAME.search(body)
            if m and not body[:1].isdigit():
                self.pending = m.group(1).removesuffix("_perf")
                return
        toks = body.split()
        if "size" in toks and "count" in toks and "type" in toks:
            self._header(toks)
            return
        if len(toks) >= 9 and toks[0].isdigit() and toks[1].isdigit() and toks[2] in TYPES:
            self._row(toks)

    def _header(self, toks: list[str]) -> None:
        self.seen = True
        self.header = toks
        self.has_redop = "redop" in toks
        self.has_root = "root" in toks
        self.wrong_column = "#wrong" if "#wrong" in toks or "wrong" in toks else ("error" if "error" in toks else None)
        if self.pending and self.collective is None:
            self.collective = self.pending

    def _close(self) -> None:
        if self.collective is None and self.pending and self.rows:
            self.collective = self.pending
        self.pending = None

    def _row(self, toks: list[str]) -> None:
        i = 3
        redop = root = None
        if i < len(toks) and toks[i].lower() in REDOPS or (i < len(toks) and toks[i].isalpha()):
            redop = toks[i]
            i += 1
        rest = toks[i:]
        if len(rest) == 9 and re.fullmatch(r"-?\d+", rest[0]) and (redop is not None or self.has_root):
            root = int(rest[0])
            rest = rest[1:]
        if len(rest) < 8 or not all(_NUM.match(t) for t in (rest[0], rest[1], rest[2], rest[4], rest[5], rest[6])):
            self.bad_rows += 1
            return
        self.seen = True
        if self.header is None:
            if self.has_redop is None:
                self.has_redop = redop is not None
                self.has_root = root is not None
            if self.wrong_column is None:
                self.wrong_column = "error" if any(c in rest[3] for c in ".eE") else "#wrong"
        self.rows.append({
            "size": int(toks[0]), "count": int(toks[1]), "type": toks[2], "redop": redop, "root": root,
            "oop_time_us": float(rest[0]), "oop_algbw": float(rest[1]), "oop_busbw": float(rest[2]),
            "oop_wrong": _wrong(rest[3]),
            "ip_time_us": float(rest[4]), "ip_algbw": float(rest[5]), "ip_busbw": float(rest[6]),
            "ip_wrong": _wrong(rest[7]),
        })

    def _inferred(self) -> str | None:
        """all_reduce is the one collective whose rows say so: a redop, root -1, count = size / type size."""
        sizes = {"int8": 1, "uint8": 1, "char": 1, "half": 2, "bfloat16": 2, "float": 4, "int32": 4, "uint32": 4,
                 "double": 8, "int64": 8, "uint64": 8}
        rows = [r for r in self.rows if r["size"] > 0]
        if rows and all(r["redop"] and r["root"] == -1 and r["type"] in sizes
                        and r["count"] * sizes[r["type"]] == r["size"] for r in rows):
            return "all_reduce"
        return None

    def result(self) -> dict[str, Any] | None:
        if not self.seen:
            return None
        largest = max(self.rows, key=lambda r: r["size"]) if self.rows else None
        return {
            "collective": self.collective or self._inferred(),
            "avg_busbw": self.avg,
            "rows": self.rows,
            "largest": largest,
            "has_redop_column": bool(self.has_redop),
            "has_root_column": bool(self.has_root),
            "wrong_column": self.wrong_column,
        }
