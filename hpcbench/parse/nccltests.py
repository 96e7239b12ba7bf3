"""nccl-tests (and rccl-tests, and hpcbench's own allreduce) result tables, every layout since v1.0.0
(tests/data/catalogue.json, tool "nccl-tests" and "rccl-tests").

Handles: headers with or without ``redop``/``root``; ``#wrong``, ``error`` and v1.0.0's ``res`` (its times
are in ms); per-iteration columns (v2.19.2+), a trailing time stamp (v2.17.6+), rccl-tests' in-place-only
tables and ``0e+00*`` errors; headers that lost their ``#`` in a web paste; tables with no header (inferred
from the row shape); duplicated headers and rows interleaved from two processes (rows are kept in file
order, the largest size is looked up, not assumed last); a launcher tag glued into each row; NCCL INFO
lines inside the table; a following test's command line. A run whose header names its test but whose
table is missing is still a run (its columns then are not known: null).
"""

from __future__ import annotations

import re
from typing import Any

from hpcbench.collectives import OTHER_TESTS, TABLE

# v1.0.0 "#   Rank %2d on", v2.0 "Pid %6d", v2.13.4 "Group %2d", rccl-tests "[0000:c1:00.0]" bus ids
RANK_LINE = re.compile(r"Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?on\s+([\w.-]+)\s+device")
AVG = re.compile(r"Avg bus bandwidth\s*:\s*([-+\d.eE]+|nan|inf)")
# every nccl-tests binary: hpcbench's collectives and the tests it only reads (longest first, so that
# reduce_scatter_perf is never read as reduce)
_TESTS = sorted((*TABLE, *OTHER_TESTS), key=len, reverse=True)
TEST_NAME = re.compile(rf"(?:^|[\s/])((?:{'|'.join(_TESTS)})_perf)\b")
STARTING = re.compile(r"Collective test (starting|concluded):\s*(\w+)")
# "# nThread 1 nGpus 8" (v1.0.0 without '#'; rccl-tests "nThread: 1", "nThreads: 1"), "# Using devices",
# rccl-tests' "rccl-tests: Version": an nccl-tests run, even when its table is missing
RUN_HEADER = re.compile(r"nThreads?:? \d+ nGpus:? \d+|^Using devices\b|^rccl-tests: Version")
TYPES = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16",
         "f8e4m3", "f8e5m2", "fp8_e4m3", "fp8_e5m2", "char", "int", "float16", "float32", "float64", "fp16",
         "fp32", "fp64", "bf16"}
TYPE_SIZE = {"int8": 1, "uint8": 1, "char": 1, "half": 2, "bfloat16": 2, "float": 4, "int32": 4, "uint32": 4,
             "double": 8, "int64": 8, "uint64": 8}
REDOPS = {"sum", "prod", "max", "min", "avg", "premulsum", "mulsum", "none"}
_NUM = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")
_STAMP = re.compile(r"\d{4}-\d\d-\d\d$|\d\d:\d\d:\d\d$")  # a row's trailing time stamp (v2.17.6+)
_TAG = re.compile(r"\s*(\[\d+\])\s")  # a launcher tag that starts each output fragment of a row
_SRUN_LABEL = re.compile(r"\d+:\s+(?=[#\d\s]|[A-Za-z#])")  # srun -l's "12: " before every line of task 12
_PERITER = ("i_min", "i_max", "i_p99", "i_cv%")


def _wrong(tok: str) -> int | float | str:
    try:
        return int(tok)
    except ValueError:
        try:
            return float(tok.rstrip("*"))  # rccl-tests marks errors above its threshold with '*'
        except ValueError:
            return tok


class NcclTestsState:
    # A line that holds none of these changes nothing here: each branch of feed tests one of them first (a
    # header its "type" column, a row its type's name).
    MARKS = ("Rank", "Avg bus bandwidth", "Collective test", "nThread", "Using devices", "rccl-tests", "_perf", "place",
             "type", *sorted(TYPES))

    def __init__(self) -> None:
        self.header: list[str] | None = None
        self.rows: list[dict[str, Any]] = []
        self.avg: float | None = None
        self.collective: str | None = None
        self.pending: str | None = None  # named by a command line or 'starting' before the table
        self.wrong_column: str | None = None
        self.has_redop: bool | None = None
        self.has_root: bool | None = None
        self.block = 4  # values per side: time algbw busbw wrong (+ 4 per-iteration ones)
        self.sides: tuple[str, ...] = ("oop", "ip")  # the blocks a row has (out-of-place, in-place)
        self.title: str | None = None  # the side the title line names alone, if it names one
        self.ms = False  # v1.0.0 prints times in ms
        self.hosts: set[str] = set()
        self.rank_hosts: dict[int, str] = {}
        self.seen = False
        self.run_header = False
        self.bad_rows = 0

    def feed(self, text: str) -> None:
        s = text.strip()
        if not s:
            return
        if s[:1].isdigit() and (label := _SRUN_LABEL.match(s)):  # no row starts "N: ", so this is srun -l's
            s = s[label.end():]
        m = _TAG.match(s + " ")
        if m:  # "[0]   1024  256  float  sum  -1[0]  10.1 ...": the tag of every fragment goes
            s = s.replace(m.group(1), " ").strip()
        body = s.lstrip("#").strip()
        if "Rank" in body and " on " in body:
            m = RANK_LINE.search(body)
            if m:
                self.hosts.add(m.group(2))
                self.rank_hosts[int(m.group(1))] = m.group(2)
                return
        if "Avg bus bandwidth" in body:
            self._avg(body)
            return
        if "Collective test" in body:
            m = STARTING.search(body)
            if m:
                self._named(m.group(1), m.group(2).removesuffix("_perf"))
                return
        if RUN_HEADER.search(body):
            self.run_header = True
            return
        if "_perf" in body:
            m = TEST_NAME.search(body)
            if m and not body[:1].isdigit():
                self.pending = m.group(1).removesuffix("_perf")
                return
        if "place" in body and ("out-of-place" in body or "in-place" in body):
            self.title = "ip" if "out-of-place" not in body else ("oop" if "in-place" not in body else None)
            return
        toks = body.split()
        if ("size" in toks or "bytes" in toks) and ("count" in toks or "N" in toks) and "type" in toks:
            self._header(toks)
            return
        if len(toks) >= 7 and toks[0].isdigit() and toks[1].isdigit() and toks[2] in TYPES:
            self._row(toks)

    def _avg(self, body: str) -> None:
        m = AVG.search(body)
        if m and self.avg is None:
            try:
                self.avg = float(m.group(1))
            except ValueError:
                pass
        self.seen = True
        self._close()

    def _named(self, when: str, name: str) -> None:
        if when == "concluded":
            if self.collective is None and (self.rows or self.seen):
                self.collective = name
        else:
            self.pending = name
            self.run_header = True

    def _header(self, toks: list[str]) -> None:
        self.seen = True
        self.header = toks
        self.has_redop = "redop" in toks or "op" in toks
        self.has_root = "root" in toks
        self.ms = "bytes" in toks  # v1.0.0: bytes, N, type, op, time (ms), algbw, busbw, res
        self.block = 8 if _PERITER[0] in toks else 4
        # one block: rccl-tests' in-place-only table, v1.0.0 broadcast's out-of-place one (the title says)
        self.sides = ("oop", "ip") if toks.count("time") != 1 else ((self.title or "oop"),)
        if "#wrong" in toks or "wrong" in toks:
            self.wrong_column = "#wrong"
        else:
            self.wrong_column = "error" if "error" in toks else ("res" if "res" in toks else None)
        if self.pending and self.collective is None:
            self.collective = self.pending

    def _close(self) -> None:
        if self.collective is None and self.pending and self.rows:
            self.collective = self.pending
        self.pending = None

    def _row(self, toks: list[str]) -> None:
        i = 3
        redop = root = None
        if i < len(toks) and (toks[i].lower() in REDOPS or toks[i].isalpha()):
            redop = toks[i]
            i += 1
        rest = toks[i:]
        while rest and _STAMP.match(rest[-1]):
            rest = rest[:-1]
        n = len(rest)
        blocks = len(self.sides)
        if rest and re.fullmatch(r"-?\d+", rest[0]) and (
                self.has_root or (self.header is None and n in (5, 9, 17) and (redop is not None or self.has_root))):
            root = int(rest[0])
            rest = rest[1:]
        if self.header is None and len(rest) in (8, 16):
            self.block, blocks = len(rest) // 2, 2
        values = self._blocks(rest, blocks)
        if values is None:
            self.bad_rows += 1
            return
        self.seen = True
        if self.header is None:
            if self.has_redop is None:
                self.has_redop = redop is not None
                self.has_root = root is not None
            if self.wrong_column is None:
                self.wrong_column = "error" if any(c in rest[3] for c in ".eE") else "#wrong"
        self.rows.append({"size": int(toks[0]), "count": int(toks[1]), "type": toks[2], "redop": redop, "root": root,
                          **values})

    def _blocks(self, rest: list[str], blocks: int) -> dict[str, Any] | None:
        """time, algbw, busbw, wrong of each side the table has; None when the values do not read."""
        b = self.block
        if len(rest) < b * blocks:
            return None
        sides = self.sides if blocks == len(self.sides) else ("oop", "ip")
        out: dict[str, Any] = {f"{p}_{k}": None for p in ("oop", "ip") for k in ("time_us", "algbw", "busbw", "wrong")}
        for k, side in enumerate(sides):
            t, alg, bus, wrong = rest[k * b:k * b + 4]
            if not (_NUM.match(t) and _NUM.match(alg) and _NUM.match(bus)):
                return None
            out |= {f"{side}_time_us": float(t) * (1000.0 if self.ms else 1.0), f"{side}_algbw": float(alg),
                    f"{side}_busbw": float(bus), f"{side}_wrong": _wrong(wrong)}
        return out

    def _inferred(self) -> str | None:
        """The collective of rows whose header is lost, where the rows say it: a redop and no root (-1, or no
        root column) is a collective that ``reduces`` and has no root; count x type size is size for one that is
        not ``shared``, size / number of ranks (the same for every row) for one that is. Validation off on one
        side only is no such collective."""
        rows = [r for r in self.rows if r["size"] > 0]
        if not rows or not all(r["redop"] and r["redop"] != "none" and r["root"] in (-1, None)
                               and r["type"] in TYPE_SIZE and r["count"] > 0 for r in rows):
            return None
        if any(r["root"] is None for r in rows) and self.has_root is not False:
            return None
        ranks = {r["size"] / (r["count"] * TYPE_SIZE[r["type"]]) for r in rows}
        shared = ranks != {1.0}
        if shared and not (len(ranks) == 1 and next(iter(ranks)).is_integer()):
            return None
        if not shared and any((r["ip_wrong"] == "N/A") != (r["oop_wrong"] == "N/A") for r in rows):
            return None  # sendrecv prints the same columns, and skips its in-place check
        fits = [c.name for c in TABLE.values() if c.reduces and c.root < 0 and c.shared == shared]
        return fits[0] if len(fits) == 1 else None

    def result(self) -> dict[str, Any] | None:
        if not self.seen and not (self.run_header and (self.pending or self.collective)):
            return None
        largest = max(self.rows, key=lambda r: r["size"]) if self.rows else None
        known = self.seen and (self.header is not None or bool(self.rows))
        return {
            "collective": self.collective or (self.pending if not self.seen else None) or self._inferred(),
            "avg_busbw": self.avg,
            "rows": self.rows,
            "largest": largest,
            "has_redop_column": bool(self.has_redop) if known else None,
            "has_root_column": bool(self.has_root) if known else None,
            "wrong_column": self.wrong_column,
        }
