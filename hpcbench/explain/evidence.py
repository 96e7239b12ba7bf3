"""Where a finding's evidence is: the first line of a log that shows it (file:line), NCCL settings taken
from the environment, NCCL's CPU affinity per GPU, and the GPU models nccl-tests names.

One pass over the first EVIDENCE_BYTES of a log; hpcbench.parse gives the facts, this gives the lines a
person can open and read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

EVIDENCE_BYTES = 64 << 20  # the evidence of a 1 GB log is in its start; reading it all would take seconds

# key -> the line shape that shows it
SHAPES: dict[str, re.Pattern[str]] = {
    "socket": re.compile(r"via NET/Socket|Using (?:internal )?[Nn]etwork Socket|NET/Socket : Using"),
    "ib_device": re.compile(r"NET/IB : Using \[\d"),
    "no_ib_device": re.compile(r"NET/IB : No device found"),
    "roce": re.compile(r"NET/IB : Using \[\d[^\n]*/RoCE"),
    "ib_transport": re.compile(r"via NET/IB"),
    "gdrdma": re.compile(r"via NET/\S*GDRDMA"),
    "shm": re.compile(r"via SHM|via direct shared memory"),
    "p2p": re.compile(r"via P2P"),
    "nvls_available": re.compile(r"NVLS multicast support is available"),
    "nvls_used": re.compile(r"via NVLS|NVLS comm 0x|[1-9]\d* nvls channels"),
    "collnet_available": re.compile(r"CollNet (?:is )?(?:enabled|supported)|Collnet \w+ enabled|CollNet: \d+ nodes"),
    "collnet_used": re.compile(r"via COLLNET|CollNet channels [1-9]"),
}
_KEYWORDS = ("NCCL", "via ", "Rank", "NVLS", "CollNet", "NET/")  # some releases print lines without the NCCL tag
_ENV = re.compile(r"\b(NCCL_[A-Z0-9_]+) set by environment to ([^\s]*)")
_AFFINITY = re.compile(r"(?:^|\s)([\w.-]+):\d+:\d+ \[\d+\] NCCL INFO Setting affinity for GPU (\d+) to ([0-9a-fA-F,]+)")
_GPU = re.compile(r"Rank\s+\d+\s.*\bdevice\s+\d+\s+\[0x[0-9a-fA-F]+\]\s+(\S.*?)\s*$")


@dataclass(frozen=True)
class Line:
    file: str
    number: int
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.number}: {self.text.strip()[:160]}"


@dataclass
class Evidence:
    first: dict[str, Line] = field(default_factory=dict)  # shape key -> its first line
    env: dict[str, tuple[str, Line]] = field(default_factory=dict)  # NCCL_X -> (value, line)
    affinity: list[tuple[str, int, str, Line]] = field(default_factory=list)  # (host, GPU, hex mask, line)
    gpus: set[str] = field(default_factory=set)  # GPU models named by nccl-tests' rank lines

    def add(self, other: Evidence) -> None:
        for k, v in other.first.items():
            self.first.setdefault(k, v)
        for k, pair in other.env.items():
            self.env.setdefault(k, pair)
        self.affinity += other.affinity
        self.gpus |= other.gpus


@cache
def scan(path: str) -> Evidence:
    """The evidence in one log (cached: the rules of several points may ask for the same file)."""
    ev = Evidence()
    try:
        with open(path, "rb") as f:
            data = f.read(EVIDENCE_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ev
    name = Path(path).name
    for n, text in enumerate(data.splitlines(), 1):
        if not any(k in text for k in _KEYWORDS):
            continue  # most lines of a big log carry nothing here
        for key, shape in SHAPES.items():
            if key not in ev.first and shape.search(text):
                ev.first[key] = Line(name, n, text)
        if (m := _ENV.search(text)) and m.group(1) not in ev.env:
            ev.env[m.group(1)] = (m.group(2).rstrip("."), Line(name, n, text))  # NCCL ends the line with '.'

        if m := _AFFINITY.search(text):
            ev.affinity.append((m.group(1), int(m.group(2)), m.group(3), Line(name, n, text)))
        if m := _GPU.search(text):
            ev.gpus.add(m.group(1))
    return ev


def of_files(paths: list[str | Path]) -> Evidence:
    ev = Evidence()
    for p in paths:
        ev.add(scan(str(p)))
    return ev


def mask_cpus(mask: str) -> set[int]:
    """NCCL's affinity mask ('ffffff00,0000ffff,ff000000': 32-bit words, most significant first) -> CPU ids."""
    value = int(mask.replace(",", ""), 16)
    return {i for i in range(value.bit_length()) if value >> i & 1}
