"""From pair timings and compute probes to named suspects, with robust statistics only.

A pair is slow when its bandwidth is far below the median of all pairs, or its latency far above: far means
both a relative drop (DROP, so a quiet cluster's tiny spread does not make 3% look like a fault) and K
scaled MADs (so a noisy cluster's spread does not either). Slow pairs are then explained away one node at a
time: a node whose probe is slow is a **compute** suspect; a node that is slow with most of its partners is
a **link** suspect (its own network: NIC, cable, port); a slow pair left over, between two nodes that are
fine with everyone else, is a **pair** suspect (the path between those two). A healthy node that met a bad
one once has one slow pair out of several and is not named.
"""

from __future__ import annotations

import heapq
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from hpcbench.hunt.schedule import Pair, confirm_round

DROP = 0.25  # a pair this much below the median bandwidth can be slow ...
K = 4.0  # ... and must also be this many scaled MADs below it
LATENCY_RISE = 1.0  # latency, the best of a pair's repeats: twice the reference (a busy host's scheduler adds
# milliseconds to a small message's time at random: only the best repeat says what the link can do)
PROBE_RISE = 0.25  # compute probe, the best of a node's repeats: this much slower than the median node (a busy
# host's other work only ever slows a repeat; a CPU quota or a slow core slows every one)
MAJORITY = 0.5  # share of a node's pairs that must be slow (more than this) to blame the node
MAD_SCALE = 1.4826  # MAD of a normal sample times this estimates its standard deviation


@dataclass(frozen=True)
class PairTest:
    a: str
    b: str
    bandwidth: tuple[float, ...]  # bytes/s, one per repeat
    latency: tuple[float, ...] = ()  # seconds of a small allreduce, one per repeat
    round: int = 0

    @property
    def pair(self) -> Pair:
        return (self.a, self.b) if self.a < self.b else (self.b, self.a)


@dataclass(frozen=True)
class Probe:
    node: str
    seconds: tuple[float, ...]  # one fixed compute step, one per repeat


@dataclass(frozen=True)
class Suspect:
    node: str
    kind: str  # KINDS
    evidence: str
    confidence: float  # the share of this node's evidence that points at it, 0..1
    partner: str | None = None  # kind "pair": the other end


KINDS = ("compute", "link", "pair")


@dataclass(frozen=True)
class Spread:
    median: float
    mad: float  # scaled: a robust standard deviation

    @staticmethod
    def of(xs: Iterable[float]) -> Spread:
        vals = list(xs)
        if not vals:
            return Spread(0.0, 0.0)
        med = statistics.median(vals)
        return Spread(med, MAD_SCALE * statistics.median(abs(x - med) for x in vals))

    def low(self, x: float, drop: float = DROP) -> bool:
        return x < self.median * (1 - drop) and self.median - x > K * self.mad

    def high(self, x: float, rise: float) -> bool:
        return x > self.median * (1 + rise) and x - self.median > K * self.mad


@dataclass(frozen=True)
class Verdict:
    suspects: tuple[Suspect, ...]
    bandwidth: Spread  # of the pairs' median bandwidths
    latency: Spread
    probe: Spread
    slow_pairs: tuple[Pair, ...]
    pairs: int
    nodes: tuple[str, ...] = field(default=())
    latency_judged: bool = True  # False where the nodes share CPUs: there a small message's time is the scheduler's

    @property
    def healthy(self) -> bool:
        return not self.suspects

    @property
    def excluded(self) -> tuple[str, ...]:
        """The nodes to keep out of the next run: every suspect's node (a pair suspect names both ends)."""
        out = [s.node for s in self.suspects] + [s.partner for s in self.suspects if s.partner]
        return tuple(dict.fromkeys(out))


def _med(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _mb(x: float) -> str:
    return f"{x / 1e6:.3g} MB/s"


def _by_node(values: dict[Pair, float], partners: dict[str, list[Pair]], best: float | None = None) -> Spread:
    """The reference pair and the spread. The spread is the MAD of each node's median pair. The reference is that
    median, or with ``best`` that quantile of the pairs (0.9 for bandwidth: a fault only ever lowers a bandwidth,
    and two bad nodes of four make five pairs of six slow, every node's median pair with them). Latency keeps the
    median: on a busy host it varies tenfold, and its low quantile is luck."""
    meds = [m for ps in partners.values() if (m := _med([values[p] for p in ps if p in values])) is not None]
    spread = Spread.of(meds)
    if best is None or not values:
        return spread
    vals = sorted(values.values())
    return Spread(vals[min(len(vals) - 1, int(best * len(vals)))], spread.mad)


def _faster_half(seconds: Iterable[float]) -> Spread:
    """The probes' reference: the faster half of the nodes (all of them up to the median). Contention only slows a
    probe, and of two nodes one slow one is half of them: the median of both would sit between."""
    vals = sorted(seconds)
    return Spread.of(vals[:max(1, (len(vals) + 1) // 2)])


def round0_healthy(tests: Sequence[PairTest], probes: Sequence[Probe] = (), latency: bool = True) -> bool:
    """Whether the test over all nodes (round 0: one pair per node, every node's probe) lets the hunt stop: every
    pair's bandwidth within DROP of the best pair's, no probe slow, and nothing ``decide`` would name. Against the
    best pair, not the median: round 0 of four nodes has two pairs, and a bad node makes one of them slow, half of
    what a median would be taken over. Latency does not gate (a busy host's small messages vary tenfold); the
    rounds that follow a doubt judge it."""
    bws = [m for t in tests if (m := _med(t.bandwidth)) is not None]
    if bws and min(bws) < (1 - DROP) * max(bws):
        return False
    return decide(tests, probes, latency).healthy


def decide(tests: Sequence[PairTest], probes: Sequence[Probe] = (), latency: bool = True) -> Verdict:
    """The suspects among the nodes of ``tests`` and ``probes``, most certain first. ``latency``: whether a pair's
    latency can make it slow; not where the nodes share CPUs (virtual nodes of one host), where a healthy pair's
    small allreduce took 2.4 ms against 0.6 in the next pair, twice, and was named a pair suspect."""
    bw = {t.pair: m for t in tests if (m := _med(t.bandwidth)) is not None}
    lat = {t.pair: min(t.latency) for t in tests if t.latency}
    secs = {p.node: min(p.seconds) for p in probes if p.seconds}
    partners: dict[str, list[Pair]] = {}
    for p in dict.fromkeys([*bw, *lat]):
        for n in p:
            partners.setdefault(n, []).append(p)
    bw_s, lat_s, probe_s = _by_node(bw, partners, 0.9), _by_node(lat, partners), _faster_half(secs.values())
    slow = {p for p, v in bw.items() if bw_s.low(v)} | {p for p, v in lat.items() if latency and lat_s.high(v, LATENCY_RISE)}
    suspects = [Suspect(n, "compute", f"compute probe {s:.3g} s (its best repeat) against the median node's {probe_s.median:.3g} s",
                        min(1.0, (s / probe_s.median - 1) / (2 * PROBE_RISE)) if probe_s.median else 1.0)
                for n, s in sorted(secs.items(), key=lambda kv: -kv[1]) if probe_s.high(s, PROBE_RISE)]
    # A node whose probe is slow is compute (slow compute slows its pairs too), and the other nodes' slow pairs are
    # blamed on links. A probe slow by chance (a busy host) must not explain away a bad link: the confirming round
    # probes it again and pairs it with a healthy node, and turns it into a link (confirm).
    computed = {s.node for s in suspects}
    # a compute suspect's pairs are its own (its partners are not blamed for them); the others' shares are taken
    # over the pairs left, so a bad link keeps its majority beside a node whose probe was slow by chance
    links = _links(partners, slow, {p for n in computed for p in partners.get(n, [])}, bw, bw_s)
    suspects += links
    explained = {p for s in suspects for p in partners.get(s.node, [])}
    for a, b in sorted(slow - explained):
        what = _mb(bw[(a, b)]) if (a, b) in bw else f"{lat[(a, b)] * 1e6:.0f} us"
        suspects.append(Suspect(a, "pair", f"only the pair {a}-{b} is slow ({what}); both are fine with their "
                                f"other partners", 0.5, partner=b))
    return Verdict(tuple(suspects), bw_s, lat_s, probe_s, tuple(sorted(slow)), len(bw),
                   tuple(sorted(partners.keys() | secs.keys())), latency)


def _links(partners: dict[str, list[Pair]], slow: set[Pair], explained: set[Pair], bw: dict[Pair, float],
           bw_s: Spread) -> list[Suspect]:
    """Nodes slow with most of their partners, blamed one at a time (the most slow first) so that a bad node's
    partners, slow only with it, are cleared by it; a node's share is over its pairs not yet explained. A heap
    with stale keys, rechecked on pop, stands in for rescanning every node each time (counts only fall)."""
    def score(n: str) -> tuple[float, int]:
        left = [p for p in partners[n] if p not in explained]
        bad = sum(1 for p in left if p in slow)
        return (bad / len(left) if left else 0.0), bad

    heap = [(-share, -count, n) for n in partners for share, count in [score(n)] if count >= 2]
    heapq.heapify(heap)
    found: list[Suspect] = []
    while heap:
        _, _, node = heapq.heappop(heap)
        share, count = score(node)
        if count < 2 or share <= MAJORITY:
            continue
        if heap and (-share, -count, node) > heap[0]:  # fell behind another node since it was pushed
            heapq.heappush(heap, (-share, -count, node))
            continue
        mine = partners[node]
        seen = ", ".join(f"{a if b == node else b} {_mb(bw[(a, b)])}" for a, b in mine if (a, b) in bw)
        found.append(Suspect(node, "link", f"{count} of {len(mine)} pairs slow against the reference pair's "
                             f"{_mb(bw_s.median)} ({seen})", share))
        explained.update(mine)
    return found


def confirm(first: Verdict, again: Sequence[PairTest], probes: Sequence[Probe] = ()) -> Verdict:
    """``first``'s suspects that are slow again in a confirming round (schedule.confirm_round), judged against
    the first rounds' spreads (a confirming round holds too few pairs for its own): a link suspect against a
    healthy partner, a compute suspect by its probe, a pair suspect by the pair itself. A suspect the round
    did not test stays, marked unconfirmed."""
    slow_pairs = {t.pair for t in again if first.bandwidth.low(_med(t.bandwidth) or math.inf)
                  or (first.latency_judged and t.latency and first.latency.high(min(t.latency), LATENCY_RISE))}
    tested_pairs = {t.pair for t in again}
    slow_nodes = {n for p in slow_pairs for n in p}
    # bandwidth only: a link is what makes a compute suspect a link suspect (latency varies tenfold on a busy host)
    narrow = {n for t in again if first.bandwidth.low(_med(t.bandwidth) or math.inf) for n in t.pair}
    tested_nodes = {n for p in tested_pairs for n in p}
    probed = {p.node: min(p.seconds, default=0.0) for p in probes}
    kept: list[Suspect] = []
    for s in first.suspects:
        if s.kind == "compute":
            tested, still = s.node in probed, first.probe.high(probed.get(s.node, 0.0), PROBE_RISE)
            if not still and s.node in narrow:  # the probe was slow by chance; the link is slow again
                kept.append(replace(s, kind="link", evidence=f"{s.evidence}, but {probed.get(s.node, 0.0):.3g} s "
                                    "when probed again; its pair with a healthy node is slow again in the "
                                    "confirming round (bandwidth): its link", confidence=0.5))
                continue
        elif s.kind == "pair" and s.partner:
            pair = (s.node, s.partner) if s.node < s.partner else (s.partner, s.node)
            tested, still = pair in tested_pairs, pair in slow_pairs
        else:
            tested, still = s.node in tested_nodes, s.node in slow_nodes
        if still:
            kept.append(replace(s, evidence=f"{s.evidence}; slow again in the confirming round"))
        elif not tested:
            kept.append(replace(s, evidence=f"{s.evidence}; not confirmed (no healthy partner was free)"))
    return replace(first, suspects=tuple(kept))


def confirm_pairs(first: Verdict, nodes: Sequence[str]) -> list[Pair]:
    """The confirming round for ``first``: each link suspect against a node found healthy, each pair suspect's
    pair again, disjoint (a compute suspect is confirmed by its probe, and given a pair when its pairs were slow)."""
    blamed = set(first.excluded)
    healthy = [n for n in nodes if n not in blamed]
    # a compute suspect with slow pairs gets a pair too: should its probe be fine again, the pair says link
    slow = {n for p in first.slow_pairs for n in p}
    links = [s.node for s in first.suspects if s.kind == "link" or (s.kind == "compute" and s.node in slow)]
    out = confirm_round(links, healthy)
    busy = {n for p in out for n in p}
    for s in first.suspects:
        if s.kind == "pair" and s.partner and not {s.node, s.partner} & busy:
            out.append((s.node, s.partner) if s.node < s.partner else (s.partner, s.node))
            busy |= {s.node, s.partner}
    return out
