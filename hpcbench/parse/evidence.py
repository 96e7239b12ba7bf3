"""Where a fact shows in a log (file:line), for a person to open and read: the first line of each transport
shape, NCCL settings taken from the environment, NCCL's CPU affinity per GPU, and the GPU models nccl-tests
names.

Read from the bytes as the scan reads them (api.read_log hands each block of the file to ``Reader.feed``),
over the first EVIDENCE_BYTES only, the same with or without the C scanner: the fast path skips lines and
so cannot say where one is. Lines are numbered as str.splitlines numbers them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hpcbench.parse.cuts import EDGE_START
from hpcbench.parse.horovod import LAUNCHER
from hpcbench.parse.nccl import SHOWN_BY
from hpcbench.parse.topology import Dump
from hpcbench.parse.topology import Reader as TopologyReader

EVIDENCE_BYTES = 64 << 20  # the evidence of a 1 GB log is in its start; reading it all would take seconds
HEAD_BYTES = 256 << 10  # benchmark banners (model, batch size) sit at the top of a log

# key -> the line shape that shows it: nccl.py's, which reads the facts
SHAPES: dict[str, re.Pattern[str]] = {key: re.compile(shape) for key, shape in SHOWN_BY.items()}
# some releases print lines without the NCCL tag; a line with none of these carries nothing here
_KEYWORDS = ("NCCL", "via ", "Rank", "NVLS", "CollNet", "NET/")
_ENV = re.compile(r"\b(NCCL_[A-Z0-9_]+) set by environment to ([^\s]*)")
_AFFINITY = re.compile(r"(?:^|\s)([\w.-]+):\d+:\d+ \[\d+\] NCCL INFO Setting affinity for GPU (\d+) to ([0-9a-fA-F,]+)")
_GPU = re.compile(r"Rank\s+\d+\s.*\bdevice\s+\d+\s+\[(?:0x[0-9a-fA-F]+|[0-9a-fA-F]{4}:[0-9a-fA-F:.]+)\]\s+(\S.*?)\s*$")
_RANK_ON = re.compile(r"#\s+Rank\s+(\d+)\s.*\bon\s+\S+")  # nccl-tests: "#  Rank  0 Group  0 Pid ... on host"
# An NCCL variable on a command line or in an export ("-x NCCL_IB_DISABLE=1", "NCCL_P2P_DISABLE=1 ./a.out"):
# what NCCL will read even when its own "set by environment" line is not in the excerpt
_CMD_ENV = re.compile(r"(?:^|[\s'\"`])(?:-x\s+|--env\s+|export\s+)?(NCCL_[A-Z0-9_]+)=([^\s'\"`\\]+)")
_ROW_TYPES = "float|half|double|bfloat16|int8|uint8|int32|uint32|int64|uint64|fp8_e4m3|fp8_e5m2|f8e4m3|f8e5m2"
# Lines that are clues to a conclusion: every one is kept (up to CLUE_MAX of a kind), with what it captured.
CLUES: dict[str, re.Pattern[str]] = {
    # aws-ofi-nccl's provider: efa is EFA, tcp/sockets/udp mean the traffic went over TCP
    "ofi_provider": re.compile(r"NET/OFI Selected [Pp]rovider is ([\w;]+)"),
    # libfabric found no EFA device (not passed into the container, or no EFA on the instance)
    "efa_missing": re.compile(r"provider efa output empty list|No EFA devices? (?:found|available)"),
    # lo or docker as NCCL's bootstrap / socket / out-of-band interface: NCCL picks them only when nothing else
    # is found (socket.cc: "^docker,lo" first, then docker, then lo) or when NCCL_SOCKET_IFNAME names them
    "lo_iface": re.compile(r"(Bootstrap ?: ?Using|NET/Socket ?: ?Using|NET ?: ?Using interface|OOB)\b[^\n]*?"
                           r"(?:\]|\s|^)(lo|docker\d*)[:<]"),
    "nnodes": re.compile(r"\bnNodes (\d+)"),
    "nranks": re.compile(r"\bn[Rr]anks (\d+)"),
    "version": re.compile(r"NCCL version (\d[\w.+-]*)"),
    # NCCL's GPU-NIC distance check (topo.cc ncclTopoCheckGdr): beyond NCCL_NET_GDR_LEVEL (default PXB), no GDR
    # (2.4-2.5 "NET/IB : ... (distance 4 >= 2)"; 2.6+ "GPU Direct RDMA Disabled for GPU 81000 / HCA 0 (distance 6 > 4)")
    "gdr_off": re.compile(r"GPU Direct RDMA Disabled for GPU[^\n]*?\(distance (\d+) >=? (\d+)\)|"
                          r"IB NIC distance\s*:\s*(SYS|PHB|NODE)"),
    "gdr_on": re.compile(r"GPU Direct RDMA Enabled for GPU (\w+)"),
    # a network edge with the GPUs' bus ids where printed: which GPU of a host sends or receives with GDRDMA
    "net_edge": re.compile(r"\b(\d+)(?:\[([0-9a-fA-F]+)\])? -> (\d+)(?:\[([0-9a-fA-F]+)\])? \[(send|receive)\]\s+via "
                           r"(NET/[^\n]*?)\s*$"),
    "no_p2p": re.compile(r"intraNodeP2pSupport 0\b"),
    # a job that failed: Horovod's and torchrun's own lines, mpirun's, a signal, an NCCL error code
    "crash": re.compile(r"exit(?:ed)? with (?:status code [1-9]\d*|non-zero status)|exited on signal \d+|"
                        r"has been blacklisted|blacklist failing host|failure count == \d+ -> stop|"
                        r"ChildFailedError|exitcode\s*:\s*-?[1-9]\d*|Signal \d+ \(SIG\w+\) received|"
                        r"\bnccl(?:Internal|System|UnhandledCuda|Remote|InvalidUsage|InvalidArgument)Error\b|"
                        r"\bNCCL error\b|returned a non-zero exit code|Segmentation fault|core dumped"),
    # a Horovod benchmark's iteration: where the job went on after a failure line (elastic Horovod drops a worker)
    "iteration": re.compile(r"Iter #(\d+): +([\d.]+) img/sec per (?:GPU|CPU)"),
    "launch_hosts": re.compile(r"\b(?:mpirun|mpiexec|horovodrun)\b[^\n]*?\s(?:-H|--host|-host|--hosts)\s+([^\s`'\"]+)"),
    # the instance, where a plugin or the user names it
    "instance": re.compile(r"Running on (\S+) platform|\b(p4de?|p5e?n?)\.48xlarge\b|\b(p4d|p5en|p5e|p5)\.24xlarge\b|"
                           r"\bon (P5en|P5e|P5|P4de|P4d)\b|\b(Standard_ND\w+_v\d)\b"),
    "launch_np": LAUNCHER,
    # NCCL got past channel setup: what it did not set up by then (NVLS, CollNet), it did not use
    "setup_done": re.compile(r"Init COMPLETE|Connected all (?:rings|trees)|\d+ coll channels"),
    "run_header": re.compile(r"nThreads?:? \d+ nGpus:? \d+"),
    "rank_line": re.compile(r"Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(\d+)\s+on\s+([\w.-]+)\s+device"),
    # a transport line's channel and ranks, and what follows them (nccl.edge_cut tells whether it was cut)
    "edge_line": re.compile(EDGE_START),
    # the start of an nccl-tests data row: its size and count (a row parse could not read is said as such)
    "row": re.compile(rf"^\s*(?:\[\d+\]\s*)?(?:\d+:\s+)?#?\s*(\d+)\s+(\d+)\s+(?:{_ROW_TYPES})\b"),
}
CLUE_MAX = 4096
_ROW_START = re.compile(r"\s*(?:\[\d+\]\s*)?(?:\d+:\s+)?#?\s*\d")
# the words a line must hold for each shape to be tried on it (most lines of a big log hold none)
_CRASH_WORDS = ("exit", "signal", "Signal", "blacklist", "failure count", "ChildFailedError", "Error", "error",
                "fault", "dumped")
_LAUNCHERS = ("mpirun", "mpiexec", "orterun", "horovodrun")
CLUE_WORDS: dict[str, tuple[str, ...]] = {
    "ofi_provider": ("Selected",), "efa_missing": ("provider efa", "EFA device"), "lo_iface": ("lo:", "lo<", "docker"),
    "nnodes": ("nNodes",), "nranks": ("nranks ", "nRanks "), "version": ("NCCL version",),
    "gdr_off": ("Direct RDMA Disabled", "NIC distance"), "gdr_on": ("RDMA Enabled for GPU",), "net_edge": ("via NET/",),
    "no_p2p": ("intraNodeP2pSupport",), "crash": _CRASH_WORDS,
    "iteration": ("img/sec per",), "launch_hosts": _LAUNCHERS, "instance": ("platform", "xlarge", "on P", "Standard_ND"), "launch_np": _LAUNCHERS,
    "setup_done": ("COMPLETE", "Connected all", "coll channels"), "run_header": ("nGpus",), "rank_line": ("Pid",),
    "edge_line": (" -> ",),
    "row": (),  # a row holds no word: tried on lines that start like one (_ROW_START)
}
_CLUE_ANY = re.compile("|".join(sorted(map(re.escape, {w for ws in CLUE_WORDS.values() for w in ws} | {"NCCL_"}))))


@dataclass(frozen=True)
class Line:
    file: str  # the log's name (not its path: the evidence is read by a person in the run's folder)
    number: int
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.number}: {self.text.strip()[:160]}"


@dataclass(frozen=True)
class Affinity:
    host: str
    gpu: int
    mask: str  # NCCL's hex mask, as printed
    line: Line


@dataclass(frozen=True)
class Clue:
    line: Line
    groups: tuple[str | None, ...]  # what its shape captured

    def value(self) -> str:
        """Its first captured group that matched."""
        return next((g for g in self.groups if g), "")


@dataclass
class Evidence:
    first: dict[str, Line] = field(default_factory=dict)  # shape key -> its first line
    env: dict[str, tuple[str, Line]] = field(default_factory=dict)  # NCCL_X -> (value, line)
    affinity: list[Affinity] = field(default_factory=list)
    gpus: set[str] = field(default_factory=set)  # GPU models named by nccl-tests' rank lines
    clues: dict[str, list[Clue]] = field(default_factory=dict)  # CLUES key -> every line of that shape
    topology: list[Dump] = field(default_factory=list)  # NCCL's topology dumps (topology.py)

    def all(self, key: str) -> list[Clue]:
        return self.clues.get(key, [])

    def add(self, other: Evidence) -> None:
        """Another log's evidence after this one's: the first line of a shape stays the first seen."""
        for k, v in other.first.items():
            self.first.setdefault(k, v)
        for name, value in other.env.items():
            self.env.setdefault(name, value)
        self.affinity += other.affinity
        self.gpus |= other.gpus
        for key, found in other.clues.items():
            self.clues.setdefault(key, []).extend(found)
        self.topology += other.topology


class Reader:
    """The evidence of one log, fed its bytes in file order, in blocks cut anywhere."""

    def __init__(self, name: str, limit: int = EVIDENCE_BYTES) -> None:
        self.evidence = Evidence()
        self._name = name
        self._topology = TopologyReader(name)
        self._left = limit  # bytes still to read
        self._carry = b""  # the start of a line the last block cut
        self._number = 0  # lines read so far
        self._head = bytearray()  # the first HEAD_BYTES

    @property
    def wants(self) -> bool:
        return self._left > 0

    def feed(self, block: bytes) -> None:
        if self._left <= 0:
            return
        block = block[:self._left]
        self._left -= len(block)
        if len(self._head) < HEAD_BYTES:
            self._head += block[:HEAD_BYTES - len(self._head)]
        cut = block.rfind(b"\n") + 1  # whole lines now; a \r\n pair is never split, nor a UTF-8 character
        if cut:
            self._lines(self._carry + block[:cut])
            self._carry = block[cut:]
        else:
            self._carry += block
        if self._left <= 0:
            self.close()

    @property
    def head(self) -> str:
        """The log's first HEAD_BYTES, as text."""
        return self._head.decode("utf-8", errors="replace")

    def close(self) -> Evidence:
        """The last line, whole or cut at the limit; what the log shows."""
        if self._carry:
            self._lines(self._carry)
            self._carry = b""
        self._left = 0
        self.evidence.topology = self._topology.dumps
        return self.evidence

    def _lines(self, data: bytes) -> None:
        for n, text in enumerate(data.decode("utf-8", errors="replace").splitlines(), self._number + 1):
            if any(k in text for k in _KEYWORDS):  # most lines of a big log carry nothing here
                self._match(n, text)
            self._topology.feed(n, text)
            if _CLUE_ANY.search(text):
                self._clues(n, text)
            elif _ROW_START.match(text) and (m := CLUES["row"].search(text)):  # a row has none of the words
                found = self.evidence.clues.setdefault("row", [])
                if len(found) < CLUE_MAX:
                    found.append(Clue(Line(self._name, n, text), m.groups()))
            self._number = n

    def _match(self, number: int, text: str) -> None:
        ev = self.evidence
        for key, shape in SHAPES.items():
            if key not in ev.first and shape.search(text):
                ev.first[key] = Line(self._name, number, text)
        if (m := _ENV.search(text)) and m.group(1) not in ev.env:
            ev.env[m.group(1)] = (m.group(2).rstrip("."), Line(self._name, number, text))  # NCCL ends it with '.'
        if m := _AFFINITY.search(text):
            ev.affinity.append(Affinity(m.group(1), int(m.group(2)), m.group(3), Line(self._name, number, text)))
        if m := _GPU.search(text):
            ev.gpus.add(m.group(1))

    def _clues(self, number: int, text: str) -> None:
        ev = self.evidence
        for key, words in CLUE_WORDS.items():
            if words and any(w in text for w in words):
                found = ev.clues.setdefault(key, [])
                if len(found) < CLUE_MAX and (m := CLUES[key].search(text)):
                    found.append(Clue(Line(self._name, number, text), m.groups()))
        if "NCCL_" in text and " NCCL INFO " not in text and "set by environment" not in text:
            for m in _CMD_ENV.finditer(text):  # the environment line NCCL prints, where present, wins
                if m.group(1) not in ev.env:
                    ev.env[m.group(1)] = (m.group(2).rstrip(".,;"), Line(self._name, number, text))


def ranks_named(head: str) -> int:
    """How many ranks nccl-tests' '# Rank N ... on HOST' lines name."""
    return len(set(_RANK_ON.findall(head)))


def mask_cpus(mask: str) -> set[int]:
    """NCCL's affinity mask ('ffffff00,0000ffff,ff000000': 32-bit words, most significant first) -> CPU ids."""
    value = int(mask.replace(",", ""), 16)
    return {i for i in range(value.bit_length()) if value >> i & 1}
