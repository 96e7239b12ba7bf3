"""How often are `hpcbench check` and `hpcbench explain` right about other people's logs? Prints figures; not a
test.

    PYTHONPATH=. .venv/bin/python benchmarks/verdict_accuracy.py [--details] [--logs tests/data/logs]

Every log of the folder is checked and explained as a user would (``hpcbench check FILE``, ``hpcbench explain
FILE``), and every line either prints (a finding, the network verdict, the link peak) is scored against
VERDICTS.json beside the logs: what an NCCL expert concludes from the log and its thread (the network, how
many hosts, whether the figures are plausible, the problems). A printed line is a verdict; it is

- correct when every claim it makes is what the expert says (or one of the statements the expert lists as
  true but minor, ``fine``);
- "can't tell" when it only says what is not known ("network not shown", "peak unknown", "rerun with
  NCCL_DEBUG=INFO"): correct when the expert cannot tell either, wrong when the expert can.

Precision is correct / printed; recall is the share of the expert's conclusions (network, hosts, figures, each
problem) that some correct verdict states. The claims of a line are read from its rule and its words by
``claims`` below: the one place that knows how a verdict is worded.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CANT = "?"  # the value of a claim that says the fact is not known

# a network as the verdict names it -> as VERDICTS.json names it
_NET = re.compile(r"(?:NET/|network )([A-Za-z][\w ]*?(?:_v\d+)?)(?:/| over ([\w+]+)| selected|[,;()]|\s*$| \()")


def _network(text: str) -> str | None:
    """The network a verdict names: NCCL's IB transport over RoCE is RoCE, over IB (or IB+RoCE) IB."""
    m = _NET.search(text)
    if not m:
        return None
    name, layer = m.group(1).strip(), m.group(2)
    if name == "IB" and layer == "RoCE":
        return "RoCE"
    return name


def claims(rule: str, claim: str) -> list[tuple[str, str]]:
    """(aspect, value) pairs one printed line asserts. Aspects: network, hosts, figures (values as in
    VERDICTS.json, or CANT), problem (a tag), rows (CANT: the excerpt has no data rows)."""
    text = claim
    out: list[tuple[str, str]] = []
    if rule == "network":
        if text.startswith("no NCCL lines") or "network not shown" in text:
            out.append(("network", CANT))
        m = re.match(r"(\d+) hosts?\b", text)
        if text.startswith("one host") or (m and m.group(1) == "1"):
            out.append(("hosts", "1"))
        elif m:
            out.append(("hosts", m.group(1)))
        elif text.startswith(("inter-node", "several hosts")):
            out.append(("hosts", "multi"))
        said = text.split("; network ", 1)  # "2 hosts (why); network RoCE, selected (...)"
        if len(said) == 2:
            m = re.match(r"([^,;(]+?)(?: over ([\w+]+))?(?:,|;|\(| selected|$)", said[1])  # main's: "X selected"
            net = None if said[1].startswith("not shown") or not m else \
                ("RoCE" if m.group(1) == "IB" and m.group(2) == "RoCE" else m.group(1).strip())
        else:
            net = _network(text) if "network not shown" not in text else None
        if net:
            out.append(("network", net))
        elif not out:
            out.append(("network", CANT))
        if "while an IB device is visible" in text:
            out.append(("problem", "socket-with-ib"))
        return out
    if rule == "link-peak":
        return [("figures", CANT)] if text.startswith("peak unknown") else [("peak", "known")]
    if rule in ("no-nccl-lines", "collect"):
        return [("collect", CANT)]
    if rule == "busbw":
        m = re.match(r"figures ([\w-]+)", text)
        word = m.group(1) if m else ""
        return [("figures", word if word in ("plausible", "low", "nothing", "latency-bound") else CANT)]
    if rule == "no-rows":
        return [("rows", CANT)]
    if rule == "nccl-env":
        m = re.match(r"(NCCL_\w+)=", text)
        return [("problem", f"env:{m.group(1)}" if m else "env:?")]
    if rule in ("unparsable", "could-not-read"):
        return [("problem", "partial-parse")]
    tags = {"nccl-warn": "warn", "nccl-warn-harmless": "warn-harmless", "ib-without-gdrdma": "no-gdr",
            "model": "model-note", "no-result": "no-result"}
    return [("problem", tags.get(rule, rule))]


def _right(aspect: str, value: str, want: dict[str, Any]) -> bool:
    """Whether one claim is what the expert says."""
    if aspect == "hosts":
        h = want["hosts"]
        if h is None:
            return False
        if value == "multi":
            return h == "multi" or (isinstance(h, int) and h > 1)
        return str(h) == value or (h == "multi" and value.isdigit() and int(value) > 1)
    if aspect in ("network", "figures"):
        if value == CANT:
            return want[aspect] is None
        return want[aspect] == value
    if aspect == "collect":  # "rerun with NCCL_DEBUG=INFO": right where the network is not shown
        return want["network"] is None and "collect" in want["fine"]
    if aspect == "rows":
        return "?rows" in want["fine"]
    if aspect == "peak":  # a link peak named: right where the log names the hardware
        return want["figures"] in ("plausible", "low")
    return value in want["problems"] or value in want["fine"]


@dataclass
class Score:
    printed: int = 0
    correct: int = 0
    cant: int = 0  # of the correct ones, those that only say "can't tell"
    cant_all: int = 0  # every "can't tell" line, right or wrong
    wanted: int = 0
    found: int = 0
    wrong: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)

    def add(self, other: Score) -> None:
        for k in ("printed", "correct", "cant", "cant_all", "wanted", "found"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.wrong += other.wrong
        self.missed += other.missed


def _wanted(want: dict[str, Any]) -> list[tuple[str, str]]:
    out = [(a, str(want[a])) for a in ("network", "hosts", "figures") if want[a] is not None]
    return out + [("problem", p) for p in want["problems"]]


def score(name: str, lines: list[tuple[str, str]], want: dict[str, Any]) -> Score:
    s = Score()
    said: set[tuple[str, str]] = set()
    for rule, claim in lines:
        cs = claims(rule, claim)
        s.printed += 1
        ok = all(_right(a, v, want) for a, v in cs)
        only_cant = all(v == CANT for _a, v in cs)
        s.cant_all += only_cant
        if ok:
            s.correct += 1
            s.cant += only_cant
            said |= {(a, v) for a, v in cs}
        else:
            s.wrong.append(f"{name}: [{rule}] {claim[:140]}")
    for a, v in _wanted(want):
        s.wanted += 1
        if a == "problem":
            hit = ("problem", v) in said
        else:
            hit = any(sa == a and sv != CANT and _right(a, sv, want) for sa, sv in said)
        s.found += hit
        if not hit:
            s.missed.append(f"{name}: {a}={v}")
    return s


def check_lines(path: Path) -> list[tuple[str, str]]:
    """What `hpcbench check FILE` prints, as (rule, claim)."""
    from hpcbench.parse import commands

    if hasattr(commands, "check_findings"):
        found = commands.check_findings(commands._read_all([str(path)]), [], False)
        return [(f.rule, f.claim) for f in found]
    from hpcbench.parse.api import parse_file
    from hpcbench.parse.checks import check_parsed, verdict

    d = parse_file(path)
    return ([("network", verdict(d))] + [(f.rule, f.claim) for f in check_parsed(d)] +
            [("unparsable", w) for w in d["warnings"]])


def explain_lines(path: Path) -> list[tuple[str, str]]:
    """What `hpcbench explain FILE` prints, as (rule, claim)."""
    from hpcbench.explain import explain_paths, render

    return [(r["rule"], r["claim"]) for r in render.rows(explain_paths([str(path)]))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logs", default=str(REPO / "tests/data/logs"))
    ap.add_argument("--details", action="store_true", help="list every wrong verdict and every missed conclusion")
    args = ap.parse_args(argv)
    folder = Path(args.logs)
    verdicts = json.loads((folder / "VERDICTS.json").read_text())["files"]
    totals = {"check": Score(), "explain": Score(), "both": Score()}
    for name, want in sorted(verdicts.items()):
        path = folder / name
        c, e = check_lines(path), explain_lines(path)
        sc, se, sb = score(name, c, want), score(name, e, want), score(name, c + e, want)
        totals["check"].add(sc)
        totals["explain"].add(se)
        totals["both"].add(sb)
    print(f"{len(verdicts)} logs, {totals['both'].wanted} expert conclusions")
    print(f"{'tool':<8} {'printed':>7} {'correct':>7} {'wrong':>5} {'cant-tell':>9} {'precision':>9} "
          f"{'prec.w/o':>8} {'recall':>6} {'cant share':>10}")
    for tool, s in totals.items():
        prec = s.correct / s.printed if s.printed else 0.0
        decided = s.printed - s.cant_all
        prec_wo = (s.correct - s.cant) / decided if decided else 0.0
        rec = s.found / s.wanted if s.wanted else 0.0
        print(f"{tool:<8} {s.printed:>7} {s.correct:>7} {s.printed - s.correct:>5} {s.cant_all:>9} {prec:>9.2f} "
              f"{prec_wo:>8.2f} {rec:>6.2f} {s.cant_all / s.printed if s.printed else 0:>10.2f}")
    if args.details:
        print("\nwrong verdicts:")
        print("\n".join("  " + w for w in totals["both"].wrong))
        print("\nmissed conclusions:")
        print("\n".join("  " + m for m in totals["both"].missed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
