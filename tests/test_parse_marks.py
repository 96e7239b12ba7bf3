"""Each reader of prints (NcclState for lines with no NCCL prefix, NcclTestsState, HorovodState, Summaries)
declares MARKS: a line that holds none of them changes nothing in it. The scanner reads each distinct print
once and then feeds its next copies only to the readers whose marks it holds (scan.Scanner._print), so a mark
left out would lose facts. Checked on every line of the corpus and on lines made of the readers' own words."""

from __future__ import annotations

import copy
import json

from conftest import DATA
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcbench.parse import prefixes, results
from hpcbench.parse.horovod import HorovodState
from hpcbench.parse.nccl import NcclState
from hpcbench.parse.nccltests import NcclTestsState

LOGS = DATA / "logs"
CORPUS = sorted(json.loads((LOGS / "EXPECTED.json").read_text())["files"])
READERS = [(NcclState, lambda r, ln: r.feed(ln)), (NcclTestsState, lambda r, ln: r.feed(ln.text)),
           (HorovodState, lambda r, ln: r.feed(ln.text)), (results.Summaries, lambda r, ln: r.feed(ln.text))]


def _check(lines: list[str]) -> int:
    """Feed ``lines`` to fresh readers; every print that holds none of a reader's marks leaves it as it was.
    How many such (line, reader) pairs were checked."""
    checked = 0
    readers = [(cls(), cls.MARKS, feed) for cls, feed in READERS]
    for text in lines:
        ln = prefixes.clean(text)
        for reader, marks, feed in readers:
            if ln.host or ln.level or ln.tag or any(k in ln.text for k in marks):
                feed(reader, ln)
                continue
            before = copy.deepcopy(vars(reader))
            feed(reader, ln)
            assert vars(reader) == before, (type(reader).__name__, text)
            checked += 1
    return checked


def test_every_corpus_line():
    checked = 0
    for name in CORPUS:
        checked += _check((LOGS / name).read_text(encoding="utf-8", errors="replace").splitlines())
    assert checked > 2000


# The readers' own words, cut short by a character: a line that holds a mark's neighbour but not the mark
WORDS = ["Rank 3 Group 0 Pid 1 on node1 device 0", "# Avg bus bandwidth : 12.5", "Collective test concluded: all_reduce_perf",
         "# nThread 1 nGpus 8", "Using devices", "rccl-tests: Version 2", "all_reduce_perf", "out-of-place in-place",
         "size count type redop root time algbw busbw #wrong", "1048576 262144 float sum -1 12.3 84.9 169.9 0",
         "8 2 int32 sum -1 1 1 1 0", "Iter #3: 601.7 img/sec per GPU", "Img/sec per GPU: 12.5 +-1.0",
         "Total img/sec on 8 GPU(s): 100.0 +-1.0", "total images/sec: 204.75", "10\timages/sec: 204.8 +/- 0.1",
         "Number of GPUs: 8", "Process 3 exit with status code 134", "failure count == 3 -> stop running",
         "mpirun -np 4 python x.py", "horovodrun -np 2 -H a:1", "hpcbench: p: 1.0 samples/s, 2.0 ms/step over 2 ranks",
         "NCCL version 2.21.5", "via NET/IB/0", "Using network IB", "NET/IB : Using [0]mlx5_0:1/IB", "rank 0 nranks 8",
         "3 nvls channels", "NVLS comm 0x1", "Connected CollNet", "Collnet Chains", "Ring 00 : 0 1"]
PIECES = WORDS + [w[:-1] for w in WORDS] + [w[1:] for w in WORDS] + [" ", "\t", "#", "0 ", "x"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(PIECES), max_size=4).map("".join), min_size=1, max_size=30))
def test_lines_of_the_readers_words(lines):
    _check(lines)
