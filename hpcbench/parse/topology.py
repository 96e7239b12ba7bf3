"""NCCL's topology dump (NCCL_DEBUG_SUBSYS=GRAPH, INIT,GRAPH or ALL), read as NCCL prints it: where each GPU and NIC
hangs (which CPU, behind which PCI switch) and the path type NCCL computed between each GPU and each network
device. Read by the evidence reader (evidence.py), line by line, the same with or without the C scanner.

What NCCL prints (src/graph/topo.cc ncclTopoPrint, paths.cc printNodePaths; 2.4 to 2.29 keep the shape):

    === System : maxBw 24.0 totalBw 24.0 ===
    CPU/1 (1/2/-1)                                  a CPU (NUMA node): the root of a tree
    + SYS[5000.0] - CPU/0                           the link to the other socket
    + PCI[24.0] - GPU/81000 (0)                     a child: behind this CPU (2.19+: 'GPU/0-81000')
    + PCI[24.0] - NIC/D1000
                  + NET[25.0] - NET/1 (...)         the network device NCCL numbers 1, on that NIC
    ==========================================
    GPU/81000 :GPU/81000 (0/5000.000000/LOC) CPU/1 (1/24.000000/PHB) NET/1 (3/24.000000/PHB) NET/0 (4/3.125000/SYS)

A child's '+' stands in the column where its parent's name starts. The path line's last field is NCCL's own path
type (topoPathTypeStr): LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS, NET, DIS, nearest first. Where an
excerpt holds the tree but no path lines, the type is NCCL's rule over the tree (paths.cc): a PCI switch both sit
behind is PXB at most, their CPU alone PHB, two CPUs SYS.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# NCCL's path types, nearest first (topo.cc topoPathTypeStr of 2.29; older releases print a subset, same order)
PATH_TYPES = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS")
# NCCL_NET_GDR_LEVEL's default (paths.cc ncclTopoCheckGdr: PATH_PXB; P2C on Grace C2C systems, which is nearer
# than PHB): a GPU whose nearest network device is PHB or SYS away gets no GPUDirect RDMA unless it is raised
GDR_DEFAULT = "PXB"
FAR = ("PHB", "SYS")
# NCCL_NET_GDR_LEVEL as an integer (before 2.7.x): paths.cc levelsOldToNew
_OLD_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")

WHO = re.compile(r"(?:^|\s)(?P<who>[\w.-]+:\d+:\d+)(?: \[\d+\])? NCCL (?:INFO|WARN) ")  # 'host:pid:tid [dev] NCCL INFO'

_NODE = r"(?P<type>GPU|PCI|NVS|CPU|NIC|NET|DEV|GIN|CXB)/(?P<id>[0-9A-Fa-f]+(?:-[0-9A-Fa-f]+)?)"
SYSTEM = re.compile(r"=== System : maxBw [\d.]+ totalBw [\d.]+ ===")
END = re.compile(r"NCCL INFO =====+\s*$|^\s*=====+\s*$")
ROOT = re.compile(r"(?:NCCL INFO |^)CPU/(?P<id>[0-9A-Fa-f]+(?:-[0-9A-Fa-f]+)?) \([-\d/]+\)\s*$")
CHILD = re.compile(r"(?:NCCL INFO |^)(?P<indent> *)\+ (?P<link>[A-Z]*)\[(?P<bw>[\d.]+)\] - " + _NODE)
PATHS = re.compile(r"(?:NCCL INFO |^)(?P<from>GPU)/(?P<gpu>[0-9A-Fa-f]+(?:-[0-9A-Fa-f]+)?) :(?P<rest>.*)$")
_PATH = re.compile(r"\bNET/([0-9A-Fa-f]+(?:-[0-9A-Fa-f]+)?) \(\d+/[\d.]+/([A-Z0-9]+)\)")
DUMPS_MAX = 4096  # one per process and communicator: a 1024-rank log holds a few per rank
WORDS = ("maxBw", "====", "CPU/", "+ ", "GPU/")  # a line holds one of these or nothing of a dump


def local_id(node_id: str) -> str:
    """'0-81000' (2.19+: system id, local id) and '81000' name the same device: its bus id, lower case."""
    return node_id.rsplit("-", 1)[-1].lower().lstrip("0") or "0"


def rank_of(path: str) -> int:
    return PATH_TYPES.index(path) if path in PATH_TYPES else len(PATH_TYPES)


def gdr_level(value: str | None) -> str | None:
    """NCCL_NET_GDR_LEVEL as a path type: a name (PHB, SYS, ...) or an old integer level; None when not set or
    not understood."""
    if value is None:
        return None
    v = value.strip().upper()
    if v in PATH_TYPES:
        return v
    return _OLD_LEVELS[int(v)] if v.isdigit() and int(v) < len(_OLD_LEVELS) else None


@dataclass(frozen=True)
class GpuNet:
    gpu: str  # local id (bus id) of the GPU
    net: str  # NCCL's network device number ('1' of NET/1)
    type: str  # NCCL's path type, PATH_TYPES
    line: int  # the line that shows it (the path line, or the GPU's line of the tree)
    text: str  # that line
    derived: bool  # from the tree (no path line in the excerpt), not NCCL's own word


@dataclass
class Dump:
    """One process's topology dump."""

    file: str  # the log's name
    who: str  # the 'host:pid:tid' prefix that printed it ('' for lines without one)
    line: int  # its '=== System' line
    gpus: dict[str, tuple[str | None, int, str]] = field(default_factory=dict)  # GPU -> (its CPU, line, its text)
    ranks: dict[str, int] = field(default_factory=dict)  # GPU -> the rank NCCL prints beside it
    nets: dict[str, tuple[str | None, int]] = field(default_factory=dict)  # NET -> (its NIC, line)
    speeds: dict[str, float] = field(default_factory=dict)  # NET -> its speed in GB/s, as NCCL rates it
    parents: dict[str, str] = field(default_factory=dict)  # 'TYPE/id' -> the node it hangs from
    nvlink: bool = False  # NVLink in the tree: NCCL may reach a NIC through a peer GPU (PXN)
    paths: dict[tuple[str, str], GpuNet] = field(default_factory=dict)  # (GPU, NET) -> NCCL's path line
    closed: bool = False  # its '=====' end line was read
    _stack: list[tuple[int, str]] = field(default_factory=list)  # (column of the name, node) of the open branch

    @property
    def host(self) -> str | None:
        return self.who.split(":", 1)[0] or None

    def _ancestors(self, node: str) -> list[str]:
        out: list[str] = []
        while node in self.parents and len(out) < 64:
            node = self.parents[node]
            out.append(node)
        return out

    def tree_path(self, gpu: str, net: str) -> str | None:
        """NCCL's path type from the tree: the lowest node both hang from (paths.cc: PCI-PCI is PXB, a CPU PHB,
        the SYS link between CPUs SYS)."""
        a, b = self._ancestors(f"GPU/{gpu}"), self._ancestors(f"NET/{net}")
        if not a or not b:
            return None
        common = next((n for n in a if n in b), None)
        if common is None:
            return "SYS" if a[-1].startswith("CPU/") and b[-1].startswith("CPU/") else None
        return "PHB" if common.startswith("CPU/") else "PXB"

    def nic_speed(self) -> tuple[float, str, int] | None:
        """The fastest network device a GPU of this dump sends through (its nearest), as NCCL rates it: (GB/s,
        'NET/n', its line); None where the dump names none."""
        used = [(self.speeds[p.net], p.net) for p in self.nearest().values() if p.net in self.speeds]
        if not used:
            return None
        gbps, net = max(used)
        return gbps, f"NET/{net}", self.nets[net][1]

    def nearest(self) -> dict[str, GpuNet]:
        """Each GPU's nearest network device: NCCL's path line, else the tree's (None where neither tells, or
        where NVLink could make it PXN)."""
        tree = {gpu: [GpuNet(gpu, net, t, line, text, True) for net in self.nets if (t := self.tree_path(gpu, net))]
                for gpu, (_cpu, line, text) in self.gpus.items()}
        # through NVLink, NCCL sends a far GPU's data out of a peer GPU near a NIC (PXN, 2.12+): the tree alone
        # cannot tell a far GPU's path then
        pxn = self.nvlink and any(rank_of(p.type) <= rank_of(GDR_DEFAULT) for ps in tree.values() for p in ps)
        out: dict[str, GpuNet] = {}
        for gpu in self.gpus:
            said = [p for (g, _n), p in self.paths.items() if g == gpu] or ([] if pxn else tree[gpu])
            if said:
                out[gpu] = min(said, key=lambda p: (rank_of(p.type), p.net))
        return out


class Reader:
    """Every topology dump of a log, fed its lines in order (dumps of several processes may interleave: each is
    read by its prefix)."""

    def __init__(self, file: str = "") -> None:
        self.file = file
        self.dumps: list[Dump] = []
        self._open: dict[str, Dump] = {}  # prefix -> its dump being read, or its last one (for path lines)

    def feed(self, number: int, text: str) -> None:
        if not (self._open or "maxBw" in text) or not any(w in text for w in WORDS):
            return  # most lines of a log: no dump has started, or nothing of one
        m = WHO.search(text)
        who = m.group("who") if m else ""
        if SYSTEM.search(text):
            if len(self.dumps) >= DUMPS_MAX:
                return
            self.dumps.append(Dump(self.file, who, number))
            self._open[who] = self.dumps[-1]
            return
        dump = self._open.get(who)
        if dump is None:
            return
        if not dump.closed:
            self._tree(dump, number, text)
        elif "GPU/" in text and (p := PATHS.search(text)):
            gpu = local_id(p.group("gpu"))
            for net, kind in _PATH.findall(p.group("rest")):
                dump.paths[(gpu, local_id(net))] = GpuNet(gpu, local_id(net), kind, number, text.strip(), False)

    def _tree(self, dump: Dump, number: int, text: str) -> None:
        if END.search(text):
            dump.closed = True
            return
        if r := ROOT.search(text):
            name = f"CPU/{local_id(r.group('id'))}"
            dump._stack = [(0, name)]
            return
        c = CHILD.search(text)
        if c is None or not dump._stack:
            return
        column = len(c.group("indent"))
        while dump._stack and dump._stack[-1][0] > column:
            dump._stack.pop()
        if not dump._stack:
            return
        parent = dump._stack[-1][1]
        kind, node_id, link = c.group("type"), local_id(c.group("id")), c.group("link")
        name = f"{kind}/{node_id}"
        if link == "NVL":
            dump.nvlink = True
        if link not in ("PCI", "NET"):  # SYS, NVL, C2C, LOC: a link to a node printed elsewhere, not a child
            return
        dump.parents.setdefault(name, parent)
        if kind == "GPU":
            cpu = next((a for a in dump._ancestors(name) if a.startswith("CPU/")), None)
            dump.gpus.setdefault(node_id, (cpu, number, text.strip()))
            if r := re.match(r" \((\d+)\)", text[c.end():]):
                dump.ranks.setdefault(node_id, int(r.group(1)))
        elif kind == "NET":
            dump.nets.setdefault(node_id, (parent, number))
            dump.speeds.setdefault(node_id, float(c.group("bw")))  # the NIC's speed (topo.cc: GB/s)
        dump._stack.append((c.start("type") - c.start("indent"), name))  # its children's '+' stand there
