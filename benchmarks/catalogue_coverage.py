"""Which of the catalogue's line shapes a real log in tests/data/logs shows. Prints figures; not a test.

    PYTHONPATH=. .venv/bin/python benchmarks/catalogue_coverage.py [--list]

A shape counts as seen when one corpus line holds the literal parts of its format string, in order (each
conversion such as %d or %s may stand for any text). Shapes whose literal text is under 6 characters
(prefixes, table rows and headers made of conversions) cannot be told this way and are counted apart.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))  # the catalogue is test data: its reader is a test helper
from catalogue_lines import shapes  # noqa: E402

LOGS = TESTS / "data/logs"
CONVERSION = re.compile(r'%%|%[-+ 0#]*(\d+|\*)?(\.(\d+|\*))?(hh|h|ll|l|z|j|t|L)?[diuxXoeEfgGcsp]|"\s*PRI[diux]64\s*"')


def literal_parts(fmt: str) -> list[str]:
    """The text between conversions, with C escapes read as a log shows them."""
    fmt = fmt.replace("\\n", " ").replace("\\t", " ").replace('\\"', '"').strip()
    parts, cur, pos = [], "", 0
    for m in CONVERSION.finditer(fmt):
        cur += fmt[pos:m.start()]
        if m.group(0) == "%%":
            cur += "%"
        else:
            parts.append(cur)
            cur = ""
        pos = m.end()
    return [p for p in [*parts, cur + fmt[pos:]] if p]


def holds(parts: list[str], line: str) -> bool:
    at = 0
    for p in parts:
        at = line.find(p, at)
        if at < 0:
            return False
        at += len(p)
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="list the shapes no corpus line shows")
    args = ap.parse_args()
    lines = [ln for f in sorted(LOGS.glob("*.log")) for ln in f.read_text(errors="replace").splitlines()]
    seen, unseen, untold = [], [], []
    for s in shapes():
        fmt = s["format"] if isinstance(s["format"], str) else " ".join(s["format"])
        parts = literal_parts(fmt)
        if sum(len(p.strip()) for p in parts) < 6:
            untold.append(s)
        else:
            (seen if any(holds(parts, ln) for ln in lines) else unseen).append(s)
    print(f"{len(shapes())} shapes; {len(lines):,} lines of {len(list(LOGS.glob('*.log')))} corpus logs")
    print(f"seen in a real log: {len(seen)}; not seen: {len(unseen)} ({sum(1 for s in unseen if s['feeds'])} of them "
          f"feed a fact); too little literal text to tell: {len(untold)}")
    print("not seen, by tool:", dict(collections.Counter(s["tool"] for s in unseen)))
    if args.list:
        for s in unseen:
            print(f"  {s['tool']:10} {s['id']:32} since {s['since']:12} feeds {','.join(s['feeds']) or '-'}")


if __name__ == "__main__":
    main()
