"""The hunt's schedule and decision, on timings shaped like the namespaced cluster's (the real hunts on it are
in test_hunt.py): the rounds pair every node once, never repeat a pair, and the decision names exactly the bad
nodes with the kind of their fault."""
from __future__ import annotations

import itertools
import random
from dataclasses import replace

import pytest

from hpcbench.hunt.decide import PairTest, Probe, confirm, confirm_pairs, decide, round0_healthy
from hpcbench.hunt.schedule import confirm_round, rounds

NODES = [f"node{i}" for i in range(1, 9)]


@pytest.mark.parametrize("n", [2, 3, 4, 7, 8, 33])
def test_all_rounds_cover_every_pair_once_with_each_node_once_per_round(n: int) -> None:
    nodes = [f"n{i}" for i in range(n)]
    sched = rounds(nodes, count=n, seed=3)
    assert len(sched) == (n - 1 if n % 2 == 0 else n)
    for pairs in sched:
        ends = [x for p in pairs for x in p]
        assert len(ends) == len(set(ends)) and len(pairs) == n // 2
    seen = [p for pairs in sched for p in pairs]
    assert sorted(seen) == sorted(tuple(sorted(p)) for p in itertools.combinations(nodes, 2))


def test_few_rounds_give_each_node_distinct_partners_and_seed_changes_them() -> None:
    nodes = [f"n{i}" for i in range(64)]
    a, b = rounds(nodes, 4, seed=1), rounds(nodes, 4, seed=2)
    assert len(a) == 4 and a != b
    partners: dict[str, set[str]] = {}
    for x, y in (p for r in a for p in r):
        partners.setdefault(x, set()).add(y)
        partners.setdefault(y, set()).add(x)
    assert all(len(v) == 4 for v in partners.values()) and len(partners) == 64
    assert rounds(["only"], 4) == []


def _world(bad_link: frozenset[str] | set[str] = frozenset(), bad_cpu: frozenset[str] | set[str] = frozenset(), bad_pair: tuple[str, str] | None = None,
           seed: int = 0, n_rounds: int = 4) -> tuple[list[PairTest], list[Probe]]:
    rng = random.Random(seed)

    def noisy(x: float) -> tuple[float, ...]:
        return tuple(x * rng.uniform(0.95, 1.05) for _ in range(3))

    tests = []
    for r, pairs in enumerate(rounds(NODES, n_rounds, seed)):
        for a, b in pairs:
            f = 0.2 if {a, b} & bad_link else 0.5 if {a, b} & bad_cpu else 1.0
            f = 0.3 if bad_pair and {a, b} == set(bad_pair) else f
            tests.append(PairTest(a, b, noisy(23e6 * f), noisy(80e-6 / f), r))
    probes = [Probe(n, noisy(0.5 / (0.3 if n in bad_cpu else 1.0))) for n in NODES]
    return tests, probes


@pytest.mark.parametrize("seed", range(10))
def test_healthy_cluster_names_no_one(seed: int) -> None:
    v = decide(*_world(seed=seed))
    assert v.healthy and v.excluded == () and not v.slow_pairs


@pytest.mark.parametrize("seed", range(5))
def test_a_slow_link_is_its_node_as_a_link_and_its_partners_are_cleared(seed: int) -> None:
    v = decide(*_world(bad_link={"node3"}, seed=seed))
    assert [(s.node, s.kind) for s in v.suspects] == [("node3", "link")]
    assert "4 of 4 pairs slow" in v.suspects[0].evidence and v.suspects[0].confidence == 1.0
    assert v.excluded == ("node3",)


def test_slow_compute_is_named_compute_even_though_its_pairs_are_slow_too() -> None:
    v = decide(*_world(bad_cpu={"node5"}))
    assert [(s.node, s.kind) for s in v.suspects] == [("node5", "compute")]
    assert "compute probe" in v.suspects[0].evidence


def test_a_probe_repeat_slowed_by_other_work_names_no_one_a_quota_that_slows_every_repeat_does() -> None:
    # the real failure: a healthy node's repeats at 0.29 and 0.45 s (a busy host for one of them); the median of two
    # (0.37 s) was 33% over the others', a compute suspect; its best repeat is what its CPU can do
    tests, probes = _world()
    busy = [Probe(p.node, (p.seconds[0], p.seconds[0] * 0.45 / 0.29)) if p.node == "node4" else p for p in probes]
    assert decide(tests, busy).healthy
    slow = decide(*_world(bad_cpu={"node4"}))
    assert [(s.node, s.kind) for s in slow.suspects] == [("node4", "compute")] and "best repeat" in slow.suspects[0].evidence


def test_where_nodes_share_cpus_a_pairs_latency_names_no_one() -> None:
    # the real case: node1-node2's small allreduce at 2.4 ms, four times the others', twice, on four virtual nodes of
    # a 2-CPU host; judged by its latency it is a pair suspect, by bandwidth (what a shared host still measures) not
    tests, probes = _world()
    slow = [replace(t, latency=tuple(4 * x for x in t.latency)) if t.pair == tests[0].pair else t for t in tests]
    assert [s.kind for s in decide(slow, probes).suspects] == ["pair"]
    assert decide(slow, probes, latency=False).healthy


def test_two_bad_nodes_are_both_found_whatever_the_pairing() -> None:
    for seed in range(10):
        v = decide(*_world(bad_link={"node2"}, bad_cpu={"node7"}, seed=seed))
        assert sorted((s.node, s.kind) for s in v.suspects) == [("node2", "link"), ("node7", "compute")], seed


def test_one_slow_pair_between_healthy_nodes_is_a_pair_suspect_naming_both_ends() -> None:
    # All 7 rounds of 8 nodes: every pair is measured, so the pair node1-node2 is in the schedule.
    v = decide(*_world(bad_pair=("node1", "node2"), n_rounds=7))
    assert [(s.node, s.kind, s.partner) for s in v.suspects] == [("node1", "pair", "node2")]
    assert v.excluded == ("node1", "node2")


def test_confirm_round_pairs_each_suspect_with_a_healthy_node() -> None:
    assert confirm_round(["n9", "n1"], ["n2", "n3", "n4"]) == [("n2", "n9"), ("n1", "n3")]


def test_confirming_round_keeps_a_real_suspect_and_drops_one_that_is_fine_against_a_healthy_partner() -> None:
    tests, probes = _world(bad_link={"node3"})
    first = decide(tests, probes)
    pairs = confirm_pairs(first, NODES)
    assert len(pairs) == 1 and "node3" in pairs[0] and set(pairs[0]) - {"node3"} <= set(NODES)
    slow = [PairTest(a, b, (23e6 * 0.2,) * 3) for a, b in pairs]
    fine = [PairTest(a, b, (23e6,) * 3) for a, b in pairs]
    kept = confirm(first, slow)
    assert [s.node for s in kept.suspects] == ["node3"] and "slow again" in kept.suspects[0].evidence
    assert confirm(first, fine).healthy
    untested = confirm(first, [])
    assert [s.node for s in untested.suspects] == ["node3"] and "not confirmed" in untested.suspects[0].evidence


def test_a_compute_suspect_is_confirmed_by_its_probe_and_a_pair_suspect_by_the_pair() -> None:
    first = decide(*_world(bad_cpu={"node5"}))
    assert confirm(first, [], [Probe("node5", (1.6,) * 3)]).excluded == ("node5",)
    assert confirm(first, [], [Probe("node5", (0.5,) * 3)]).healthy
    pair = decide(*_world(bad_pair=("node1", "node2"), n_rounds=7))
    assert confirm_pairs(pair, NODES) == [("node1", "node2")]
    assert confirm(pair, [PairTest("node1", "node2", (23e6,) * 3)]).healthy


def test_round_0_of_four_nodes_doubts_a_bad_node_though_it_is_half_the_pairs() -> None:
    four = ["node1", "node2", "node3", "node4"]
    pairs = rounds(four, 1, seed=0)[0]
    probes = [Probe(n, (0.1, 0.1, 0.1)) for n in four]

    def round0(slow: str | None) -> list[PairTest]:
        return [PairTest(a, b, tuple(x * (0.2 if slow in (a, b) else 1.0) for x in (15e6, 15.2e6, 14.9e6)))
                for a, b in pairs]

    assert round0_healthy(round0(None), probes)
    assert decide(round0("node3"), probes).healthy  # the median of two pairs cannot tell which is right...
    assert not round0_healthy(round0("node3"), probes)  # ...the best pair can
    assert not round0_healthy(round0(None), [*probes[:3], Probe("node4", (0.4, 0.41, 0.39))])


def test_two_bad_nodes_of_four_are_both_found_though_five_pairs_of_six_are_slow() -> None:
    four = ["node1", "node2", "node3", "node4"]
    tests = [PairTest(a, b, tuple(x * (0.2 if {a, b} & {"node1", "node4"} else 1.0) for x in (15e6, 15.2e6, 14.9e6)),
                      (4e-4, 5e-4, 4.5e-4), r) for r, pairs in enumerate(rounds(four, 3, seed=2)) for a, b in pairs]
    v = decide(tests, [Probe(n, (0.3, 0.31, 0.3)) for n in four])
    assert sorted((s.node, s.kind) for s in v.suspects) == [("node1", "link"), ("node4", "link")]


def test_probes_that_shared_cpus_of_one_kernel_are_told_apart_from_real_nodes() -> None:
    from hpcbench.hunt.run import share_cpus, shared_words

    def p(node: str, host: str, *cpus: int) -> dict:
        return {"node": node, "host": host, "cpus": list(cpus), "seconds": [0.3]}

    # four virtual nodes on two cores of one kernel: node1/node3 on CPU 0, node2/node4 on CPU 1
    four = [p("node3", "k", 0), p("node2", "k", 1), p("node1", "k", 0), p("node4", "k", 1)]
    assert share_cpus([four[0], four[2]]) and not share_cpus([four[0], four[1]])
    assert shared_words(four) == "node1, node3 share CPU 0 of one host; node2, node4 share CPU 1 of one host"
    # the same CPU numbers on different kernels (real nodes); a probe from an older hpcbench, with no host
    assert not share_cpus([p("a", "k1", 0), p("b", "k2", 0)])
    assert not share_cpus([{"node": "a", "seconds": [1.0]}, {"node": "b", "seconds": [1.0]}])



def test_a_probe_slow_by_chance_does_not_hide_a_bad_link() -> None:
    """node3's link is bad and its first probe was slow by chance (a busy host): the confirming round probes it
    again (fine) and pairs it with a healthy node (slow again): a link, not compute, and not cleared."""
    tests, probes = _world(bad_link={"node3"})
    probes = [Probe(p.node, (0.8,) * 3) if p.node == "node3" else p for p in probes]
    first = decide(tests, probes)
    assert [(s.node, s.kind) for s in first.suspects] == [("node3", "compute")]
    pairs = confirm_pairs(first, NODES)
    assert len(pairs) == 1 and "node3" in pairs[0]
    again = [PairTest(a, b, (23e6 * 0.2,) * 3) for a, b in pairs]
    v = confirm(first, again, [Probe("node3", (0.5,) * 3)])
    assert [(s.node, s.kind) for s in v.suspects] == [("node3", "link")] and "its link" in v.suspects[0].evidence
    # its pair fine too: nothing was wrong
    assert confirm(first, [PairTest(a, b, (23e6,) * 3) for a, b in pairs], [Probe("node3", (0.5,) * 3)]).healthy
    # a real compute problem: slow again when probed again, whatever its pair says
    assert [s.kind for s in confirm(first, again, [Probe("node3", (1.6,) * 3)]).suspects] == ["compute"]
    # a pair slow only by its latency (a busy host's small messages) does not make it a link
    slow_lat = [PairTest(a, b, (23e6,) * 3, (1.0,) * 3) for a, b in pairs]
    assert confirm(first, slow_lat, [Probe("node3", (0.5,) * 3)]).healthy


def test_a_compute_suspects_pairs_do_not_blame_its_partners() -> None:
    """node3 is held to 30% of its CPUs: its pairs are slow. node1-node2's small messages were slow by chance (a
    busy host): with node3's pairs counted against them, two of their three pairs would be slow, two 'links'."""
    four = ["node1", "node2", "node3", "node4"]
    # two of node3's three pairs slow (its third, by chance, not): node1, node2 and node3 each have two slow pairs
    tests = [PairTest(a, b, tuple(x * (0.5 if "node3" in (a, b) and "node4" not in (a, b) else 1)
                                  for x in (15e6, 15.1e6, 14.9e6)),
                      (4e-4 * (4 if {a, b} == {"node1", "node2"} else 1),) * 3, r)
             for r, pairs in enumerate(rounds(four, 3, seed=0)) for a, b in pairs]
    probes = [Probe(n, (0.5,) * 3 if n == "node3" else (0.3, 0.31, 0.3)) for n in four]
    first = decide(tests, probes)
    assert [(s.node, s.kind) for s in first.suspects] == [("node3", "compute"), ("node1", "pair")]
    # the confirming round: node3 against healthy node4 (its pairs were slow), node1-node2 again: fine this time
    assert confirm_pairs(first, four) == [("node3", "node4"), ("node1", "node2")]
    v = confirm(first, [PairTest("node3", "node4", (7.5e6,) * 3, (4e-4,) * 3),
                        PairTest("node1", "node2", (15e6,) * 3, (4e-4,) * 3)], [Probe("node3", (0.5,) * 3)])
    assert [(s.node, s.kind) for s in v.suspects] == [("node3", "compute")]
