"""What NCCL's INFO/WARN lines say: version, network, transports per edge, hosts, NVLS/CollNet use.

Transport names are normalised as in tests/data/logs/EXPECTED.json ``_schema``: the text after
``via`` without device index, proxy rank, ``/read``, ``(PCI)`` or ``/Shared``; ``/GDRDMA`` stays.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import Any

from hpcbench.parse.cuts import cut_transport
from hpcbench.parse.prefixes import Line
from hpcbench.vocab import LINK_LAYERS, NET_IB, NET_ROCE, NET_SOCKET

VERSION = re.compile(r"[NR]CCL version (?:: )?(\S+)")  # NCCL 1.x-2.30; RCCL "version X" and "version : X"
# The INFO messages that can carry a fact, by how they start (tests/data/catalogue.json names the shapes). The line
# path reads facts only from these, and the fast path hands on only these, so both read the same lines.
# Literal starts, '#' a digit: the C scanner (_scan.c) tests them as they are, the regex is made from them.
FACT_PREFIXES = ("NCCL version", "RCCL version", "Using ", "NET/", "NET :", "Bootstrap", "Channel", "Ring", "Coll",
                 "comm ", "ncclComm", "[Rank", "Init timings", "rank #", "NVLS", "Connected", "#")


def prefix_regex(prefixes: tuple[str, ...]) -> str:
    return "|".join(re.escape(p).replace(r"\#", "[0-9]") for p in prefixes)


FACT_STARTS = prefix_regex(FACT_PREFIXES)
_FACT = re.compile(FACT_STARTS)
_USING_NET = r"Using (?:network|internal Network|external Network) "
USING_NETWORK = re.compile(_USING_NET + r"(.+?)\s*$")
IB_USING = re.compile(r"NET/IB ?: ?Using \[")
# " [0]mlx5_0:1/IB", merged NICs " [0]={[0] mlx5_2:1/RoCE, ...}", 2.30.7 rail and plane "mlx5_0:1:0:1/IB" or
# "mlx5_0:1::1/IB" (plane only), 2.3 "[0] mlx5_0:1/IB"
_IB_DEVICE = r"\[\d+\]\s?([\w.-]+):\d+(?::\d*)*/({})"
IB_DEVICE = re.compile(_IB_DEVICE.format("IB|RoCE|UNSPECIFIED"))
IB_NODEV = re.compile(r"NET/IB ?: ?No device found")
SOCKET_USING = re.compile(r"NET/Socket ?: ?Using \[")
IB_IFACE = re.compile(r"(?:^|[\s\]])(ib[\w.]*|ibp[\w.]*|ibs[\w.]*)(?::\d| for sideband)")  # IPoIB OOB/sideband
EDGE = re.compile(r"(?:Channel|Ring) (\d+)(?:/\d+)? : (\d+)(?:\[[^\]]*\])?(?: -> (\d+)(?:\[[^\]]*\])?)?"
                  r"(?: \[(send|receive)\])?\s+via\s+(.+?)\s*$")
COLL_EDGE = re.compile(r"(?:CollNet|Coll) (\d+)(?:/\d+)? : (\d+)(?:\[[^\]]*\])? \[(send|receive)\]\s+via\s+(.+?)\s*$")
# init, comm-summary, Init timings and NVLS comm lines; a collective's "[nranks=N]" is chatter, not read
NRANKS = re.compile(r"\brank (\d+) n[Rr]anks (\d+)")
# An init line (and the comm summary, Init timings): its comm pointer makes each one unique. The rank it
# names runs on the host that prints it; the first line for each (rank, nranks) says so (fastpath.py hands
# on no more, so both paths read the same).
INIT_MSG = (r"(?:(?:\[Rank [0-9]+\] )?(?:ncclComm[A-Za-z]* )?comm 0x[0-9a-fA-F]+ |Init timings(?: - [A-Za-z]+)?: )"
            r"rank ([0-9]+) n[Rr]anks ([0-9]+)(?![^ \n])")
INIT_STARTS = ("[Rank", "ncclComm", "comm 0x", "Init timings")  # how every INIT_MSG starts (a test checks)
_INIT = re.compile(INIT_MSG)
# NVLS is used once its graph has channels: a channel count above 0, or a line NCCL prints only then
# (graph/connect.cc prints the heads and trees of the NVLS graph; nvls.cc the NVLS comm, its tuning and
# the connected tree). "multicast support is available" says only that it could be.
_NVLS_CHANNELS = r"({n}) nvls channels|nvls channels:\s*({n})|NVLS tuning: nChannels ({n})"
NVLS_CHANNELS = re.compile(_NVLS_CHANNELS.format(n=r"\d+"))
NVLS_USED = re.compile(r"NVLS comm 0x|Connected NVLS|NVLS Head +\d+:|NVLS Trees :")
# CollNet connected (2.9+), its chains (printed after the CollNet setup check passed, 2.14-2.21)
_COLLNET_CHAINS = "Collnet Chains "  # a message of its own: it starts the message
COLLNET_USED = re.compile(r"Connected (?:CollNet|collnet|Collnet Chains)|CollNet channels connected|^" + _COLLNET_CHAINS)
_VIA = r"\bvia\s+"  # a transport line's transport, as EDGE and COLL_EDGE read it (normalise names it)
# The lines that show a fact, for parse/evidence.py's file:line, made of the patterns that read the fact. The
# evidence reads whole lines, prefixes and all, so a message's start is any start there. *_available: what
# NCCL says it could use, read only as evidence.
SHOWN_BY: dict[str, str] = {
    "socket": "|".join((_VIA + "NET/Socket", _USING_NET + "Socket", SOCKET_USING.pattern)),
    "ib_device": r"NET/IB[^\n]*" + _IB_DEVICE.format("IB|RoCE|UNSPECIFIED"),
    "no_ib_device": IB_NODEV.pattern,
    "roce": r"NET/IB[^\n]*" + _IB_DEVICE.format("RoCE"),
    "ib_transport": _VIA + "NET/IB",
    "gdrdma": _VIA + r"NET/[^\n]*GDRDMA",  # a plugin's name may hold a space (NET/AWS Libfabric/0/GDRDMA)
    "shm": _VIA + "(?:SHM|direct shared memory)",
    "p2p": _VIA + "P2P",
    "nvls_available": "NVLS multicast support is available",
    "nvls_used": NVLS_USED.pattern + "|" + _NVLS_CHANNELS.format(n=r"0*[1-9]\d*"),  # a count above 0
    "collnet_available": r"CollNet (?:is )?(?:enabled|supported)|Collnet \w+ enabled|CollNet: \d+ nodes",
    "collnet_used": "|".join((_VIA + "COLLNET", COLL_EDGE.pattern, COLLNET_USED.pattern.replace("^", r"(?:^|\s)"))),
}
NEVER_HOST = re.compile(r"\d+\.\d+\.\d+\.\d+$")
INTRA_ONLY = ("P2P/IPC", "P2P/CUMEM", "P2P/direct", "P2P/indirect", "SHM", "NVLS")

# An edge of result(), its keys in order: ints, then texts (str or None); commands._edges_json writes them so
EDGE_INTS = ("channel", "src", "dst")
EDGE_TEXTS = ("transport", "raw", "host", "scope")
EDGE_FIELDS = EDGE_INTS + EDGE_TEXTS
EDGE_MSGS_MAX = 200_000  # edge messages remembered for the rank -> host map (~25 MB at most)
# An edge line as NcclState._edges reads it: (start, host as printed, EDGE's match, channel, src, dst, direction,
# raw transport); the C scanner cuts them so (_scan.pyi)
EdgeRow = tuple[int, "str | None", str, int, int, "int | None", "str | None", str]

_DEV_INDEX = re.compile(r"/\d+(?:\(\d+\))?(?=/|$)")


def _warn_key(text: str) -> str:
    """The same WARN from 64 ranks differs only in numbers (ranks, addresses, ports)."""
    return re.sub(r"0x[0-9a-fA-F]+|\d+", "#", text)


@functools.lru_cache(maxsize=4096)
def normalise(raw: str) -> str:
    """'NET/IB/0/GDRDMA(PCI)' -> 'NET/IB/GDRDMA', 'P2P/direct pointer/read' -> 'P2P/direct', ..."""
    t = raw.strip().rstrip(".,;")
    if t.startswith("COLLNET"):
        return "CollNet"
    if t.startswith(("SHM", "direct shared memory")):
        return "SHM"
    if t.startswith("NVLS"):
        return "NVLS"
    t = t.replace("(PCI)", "").replace("/Shared", "")
    if t.startswith("P2P/"):
        kind = t[4:].split("/")[0].split("[")[0]
        if kind.startswith("direct pointer") or kind == "direct":
            return "P2P/direct"
        return "P2P/" + kind.strip()
    if t.startswith("NET/"):
        body = _DEV_INDEX.sub("", t[4:])
        parts = [p for p in body.split("/") if p and p not in ("read",)]
        name = parts[0] if parts else ""
        return "NET/" + name + ("/GDRDMA" if "GDRDMA" in parts[1:] else "")
    return t


def _as_printed(host: str) -> str:
    """The host of a line the line path read: prefixes.host_name had it already."""
    return host


@functools.lru_cache(maxsize=4096)  # a job prints a few transports 16,000 times
def _normalised(raw: str) -> str | None:
    return None if cut_transport(raw) else normalise(raw)


class NcclState:
    """Accumulates facts line by line; ``result()`` gives the issue's ``nccl`` object."""

    # A print (no NCCL prefix or marker) that holds none of these changes nothing here (_facts tests each first);
    # NOT_EDGE: those of facts other than an edge's and NET/IB's (read_edges). tests/test_parse_marks.py
    MARKS = ("CCL version", "via", "Using", "NET/IB", "anks ", "nvls", "NVLS", "ollNet", "ollnet")
    NOT_EDGE = tuple(k for k in MARKS if k not in ("via", "NET/IB"))

    def __init__(self) -> None:
        self.seen = False
        self.version: str | None = None
        self.net_selected: str | None = None  # from 'Using network X' / 'Using internal Network X'
        self.ib_using = False
        self.ib_failed = False
        self.socket_using = False
        self.ib_devices: dict[str, None] = {}
        self.link_layers: set[str] = set()
        self.ib_ifaces: dict[str, None] = {}
        self.hosts: set[str] = set()
        self.raw_transports: dict[str, str] = {}  # each raw transport read, to itself: one str object for all its edges
        self.nranks: int | None = None
        self.rank_hosts: dict[int, set[str]] = {}
        self.nvls = False
        self.collnet = False
        # (channel, src, dst or -1, transport), as result() lists them: (raw, first host, direction); None: no peer
        self.edges: dict[tuple[int, int, int, str], tuple[str, str | None, str | None] | None] = {}
        self._edge_msgs: set[str] = set()
        self._ib_raws: set[str] = set()  # transports of edges whose NET/IB devices were read (_edges)
        self._init_keys: set[tuple[str, str]] = set()
        self.warns: dict[str, dict[str, Any]] = {}

    def add_host(self, host: str) -> None:
        if host not in self.hosts and not NEVER_HOST.match(host):
            self.hosts.add(host)

    def rank_on(self, rank: int, host: str | None) -> None:
        self.ranks_on(((rank, host),))

    def ranks_on(self, pairs: Iterable[tuple[int, str | None]]) -> None:
        """Each (rank, host): the rank runs on the host (None: not known)."""
        rank_hosts = self.rank_hosts
        for rank, host in pairs:
            if host:
                hosts = rank_hosts.get(rank)
                if hosts is None:
                    rank_hosts[rank] = {host}
                else:
                    hosts.add(host)

    def feed(self, ln: Line) -> None:
        if ln.host:
            self.seen = True
            self.add_host(ln.host)
            for h in ln.glued:
                self.add_host(h)
        if ln.level:
            self.seen = True
            if ln.level == "WARN":
                self._warn(ln)
            elif not _FACT.match(ln.msg):
                return
        self._facts(ln)

    def _facts(self, ln: Line) -> None:
        msg = ln.msg
        if "CCL version" in ln.text and self.version is None:
            m = VERSION.search(ln.text)
            if m:
                self.version = m.group(1)
                self.seen = True
        if "via" in msg:
            self._edge(ln)
        if "Using" in msg:
            m = USING_NETWORK.search(msg)
            if m and self.net_selected is None and (ln.level or ln.host or msg.startswith("Using")):
                self.net_selected = m.group(1)
                self.seen = True
            if IB_USING.search(msg):
                self.ib_using = True
                self.seen = True
            if SOCKET_USING.search(msg):
                self.socket_using = True
            if "ib" in msg:
                for m in IB_IFACE.finditer(msg):
                    self.ib_ifaces[m.group(1)] = None
        if "NET/IB" in msg:
            self._net_ib(msg)
        if "anks " in msg:
            m = _INIT.match(msg) or NRANKS.search(msg)
            if m:
                self.nranks = max(self.nranks or 0, int(m.group(2)))
                if m.re is _INIT and (key := (m.group(1), m.group(2))) not in self._init_keys:
                    self._init_keys.add(key)
                    self.rank_on(int(m.group(1)), ln.host)
        if "nvls" in msg or "NVLS" in msg:
            m = NVLS_CHANNELS.search(msg)
            if (m and int(m.group(1) or m.group(2) or m.group(3)) > 0) or NVLS_USED.search(msg):
                self.nvls = True
        if ("ollNet" in msg or "ollnet" in msg) and COLLNET_USED.search(msg):
            self.collnet = True

    def _net_ib(self, msg: str) -> None:
        self.seen = True
        for m in IB_DEVICE.finditer(msg):
            self.ib_devices[m.group(1)] = None
            self.link_layers.add(m.group(2))
        if IB_NODEV.search(msg):
            self.ib_failed = True

    def read_edges(self, edges: Iterable[EdgeRow], host_of: Callable[[str], str | None]) -> None:
        """``feed`` of plain INFO lines, in file order, whose messages are edges with no NOT_EDGE mark, cut by the C
        scanner (fastpath.py's 'edges'; ~16,000 of a 1024-rank job)."""
        self.seen = True  # feed: a host, a level
        self._edges(edges, host_of, ib=True)

    def _edges(self, rows: Iterable[EdgeRow], host_of: Callable[[str], str | None], ib: bool) -> None:
        """The edges of ``rows``, each (start, host as printed, EDGE's match, its groups with the numbers as ints);
        a row's host is host_of(its host as printed). One loop for a run of edges: a 1024-rank job has ~16,000.
        ``ib``: read the IB devices a message names too, as _facts does (the line path's _facts reads them)."""
        edges, raws, msgs, ib_read = self.edges, self.raw_transports, self._edge_msgs, self._ib_raws
        last: str | None = None
        host: str | None = None
        on: list[tuple[int, str | None]] = []  # (rank, host) of each edge's printer: ranks_on, after
        for _, printed, whole, ch, src, dst, direction, raw in rows:
            if printed != last:  # a rank prints its edges one after another (a line with no host: None, as last starts)
                last, host = printed, host_of(printed) if printed is not None else None
                if host:
                    self.add_host(host)
            if ib and "NET/IB" in whole:  # as _facts reads it
                if whole.find("NET/IB") < len(whole) - len(raw):
                    self._net_ib(whole)  # before the transport too (in a rank's brackets): the whole message
                elif raw not in ib_read:  # in the transport alone: once for each transport
                    ib_read.add(raw)
                    self._net_ib(raw)
            t = _normalised(raw)
            if t is None:
                continue  # cut: said as 'could not read' by the check that reads the lines (checks.py)
            if (known := raws.get(raw)) is None:
                self._transport(raw)
            else:
                raw = known
            key = (ch, src, -1 if dst is None else dst, t)
            if key not in edges:
                edges[key] = None if dst is None else (raw, host, direction)  # a line with no peer is no edge
            # The rank that printed it runs on this host. Only the first copy of a message counts (what the fast
            # path reads)
            if dst is not None and whole not in msgs and len(msgs) < EDGE_MSGS_MAX:
                msgs.add(whole)
                on.append((dst if direction == "receive" else src, host))
        self.ranks_on(on)

    def _warn(self, ln: Line) -> None:
        text = ln.msg.strip()
        key = _warn_key(text)
        w = self.warns.get(key)
        if w is None:
            self.warns[key] = {"message": text, "count": 1, "first_host": ln.host, "first_rank": ln.rank}
        else:
            w["count"] += 1

    def count_warn(self, text: str, n: int) -> None:
        """More copies of a WARN already read (the fast path counts them without reading each)."""
        w = self.warns.get(_warn_key(text.strip()))
        if w is not None:
            w["count"] += n

    def _edge(self, ln: Line) -> None:
        msg = ln.msg
        m = EDGE.match(msg) or EDGE.search(msg)  # the same match: a search tries the start first
        if m:
            ch, a, b, direction, raw = m.groups()
            self._edges([(0, ln.host, m.group(0), int(ch), int(a), None if b is None else int(b), direction, raw)],
                        _as_printed, ib=False)
            return
        m = COLL_EDGE.search(msg)
        if m:
            self._transport(m.group(4))
            self.collnet = True

    def _transport(self, raw: str) -> None:
        self.seen = True
        self.raw_transports[raw] = raw
        if raw.startswith("COLLNET"):
            self.collnet = True

    def network(self) -> tuple[str | None, str | None]:
        """The network as a user names it: IB, RoCE (NCCL's IB transport over RoCE devices), Socket, or the
        plugin's own name (IBext_v8, AWS Libfabric, ...); and whether a selection line or only the
        transport lines show it."""
        name, source = self._selected()
        if name == NET_IB and self._link_layers() == [NET_ROCE]:
            name = NET_ROCE
        return name, source

    def _link_layers(self) -> list[str]:
        return sorted(self.link_layers & set(LINK_LAYERS))

    def _selected(self) -> tuple[str | None, str | None]:
        if self.net_selected:
            return self.net_selected, "selection_line"
        if self.ib_using and not self.ib_failed:
            return NET_IB, "selection_line"
        if self.ib_failed and self.socket_using:
            return NET_SOCKET, "selection_line"
        counts: dict[str, int] = {}  # the network of transport lines: the one with most edges (the first, of a tie)
        for t, n in Counter(key[3] for key in self.edges).items():
            if t.startswith("NET/"):
                name = t[4:].removesuffix("/GDRDMA")
                counts[name] = counts.get(name, 0) + n
        if counts:
            return max(counts, key=lambda k: counts[k]), "transport_lines"
        return None, None

    def result(self) -> dict[str, Any] | None:
        if not self.seen:
            return None
        transports = {normalise(r) for r in self.raw_transports}
        if self.nvls:
            transports.add("NVLS")
        if self.collnet:
            transports.add("CollNet")
        one = {r: next(iter(hs)) for r, hs in self.rank_hosts.items() if len(hs) == 1}  # a rank's one host
        edges = []
        # by channel, src, dst, transport: the keys, alone (the keys differ, and sort's compare of tuples of ints
        # first is twice as fast as of (key, value) pairs: 6 ms of 16,384 edges)
        for (chan, src, dst, t), stored in sorted(self.edges.items(), key=itemgetter(0)):
            if stored is None:
                continue
            raw, host, direction = stored
            hs, hd = one.get(src), one.get(dst)
            scope = (("intra" if hs == hd else "inter") if hs and hd else "inter" if direction and t.startswith("NET/")
                     else "intra" if t.startswith(INTRA_ONLY) else None)
            edges.append({"channel": chan, "src": src, "dst": dst, "transport": t, "raw": raw, "host": host,
                          "scope": scope})
        network, source = self.network()
        link = "+".join(self._link_layers()) or None
        return {
            "version": self.version,
            "network": network,
            "network_source": source,
            "transports": sorted(transports),
            "transports_raw": sorted(self.raw_transports),
            "hosts": sorted(self.hosts),
            "nranks": self.nranks,
            "nvls_used": self.nvls,
            "collnet_used": self.collnet,
            "ib_link_layer": link,
            "ib_devices": list(self.ib_devices) + [i for i in self.ib_ifaces if i not in self.ib_devices],
            "edges": edges,
            "warnings": [w["message"] for w in self.warns.values()],
            "warn_details": list(self.warns.values()),
        }
