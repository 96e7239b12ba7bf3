"""Bytes on the wire: per point and node, what its busiest interface sent per step during the timed steps (the
ranks' interface counters) and the rate that reached against the node's link peak, with where the peak comes from."""

from __future__ import annotations

from hpcbench.figures.aggregate import Agg
from hpcbench.figures.wire import bytes_words, machines, node_wires
from hpcbench.report.names import names_apart
from hpcbench.tabular import Table


def wire_table(aggs: list[Agg]) -> Table:
    measured = [a for a in aggs if a.ok and (a.nodes or 1) > 1]
    names = names_apart(measured)
    rows, without, shared = [], [], set()
    for a in measured:
        prov = a.first_measured.provenance
        wires = node_wires(prov)
        if not wires:
            without.append(names[id(a)])
            continue
        m = machines(prov)
        if m is not None and m.one_host_many_namespaces:
            shared.add(len(next(iter(m.hosts.values()))))
        for w in wires:
            rows.append([names[id(a)], w.node, w.interface, bytes_words(w.per_step), f"{bytes_words(w.rate)}/s",
                         w.peak.words() if w.peak else "unknown", f"{w.share:.0%}" if w.share is not None else "—",
                         w.peak.source if w.peak else w.peak_why])
    t = Table("wire", "Bytes on the wire: each node's busiest interface during the timed steps",
              ["point", "node", "interface", "sent per step", "rate", "link peak", "of peak", "peak from"], rows,
              empty="no multi-node point with interface counters")
    if rows:
        t.notes.append("counters: /sys/class/net/<interface>/statistics/tx_bytes inside the node, read by its lowest "
                       "rank before and after the timed steps (a collective: its largest size, in place); peak: the "
                       "node's declared link (HPCBENCH_LINKS), else the interface's sysfs speed")
    t.notes += [f"nodes in separate network namespaces of one host ({n} nodes): the links are real; compute is "
                "shared" for n in sorted(shared)]
    if without:  # said, never dropped; one line however many (a corpus of logs has none of them)
        shown = ", ".join(without[:5]) + (f" and {len(without) - 5} more" if len(without) > 5 else "")
        t.notes.append(f"no interface counters for {len(without)} multi-node point(s): {shown} (logs, or records "
                       "of an older hpcbench)")
    return t
