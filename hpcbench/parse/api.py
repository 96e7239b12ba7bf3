"""``parse_file(path) -> dict``: the per-file JSON object of ``hpcbench parse``. Never raises on content;
what cannot be read becomes a warning on the file. A missing or unreadable file is a ConfigError
(NoSuchFile for a missing one), as everywhere.

``read_log(path) -> Log``: the same facts and, from the same read, the lines that show them (evidence.py),
for the explain rules: they never open a log themselves."""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from hpcbench.errors import ConfigError, NoSuchFile
from hpcbench.parse import results, scan
from hpcbench.parse.scan import CHUNK, Scanner

if TYPE_CHECKING:  # imported by read_log: `hpcbench parse` does without its regexes (~10 ms of its start)
    from hpcbench.parse.evidence import Evidence, Reader

WHOLE_JSON_MAX = 64 << 20  # a result.json is small; bigger files are only scanned line by line


@dataclass(frozen=True)
class Log:
    """One log as parse read it: the facts (parse_file's object) and the lines that show them."""

    facts: dict[str, Any]  # JSON-shaped, as `hpcbench parse` prints it
    evidence: Evidence
    head: str  # its first evidence.HEAD_BYTES as text: the banners a benchmark prints (model, batch size)


def parse_file(path: str | Path) -> dict[str, Any]:
    return _parse(path, None)


def read_log(path: str | Path) -> Log:
    from hpcbench.parse.evidence import Reader

    reader = Reader(Path(path).name)
    facts = _parse(path, reader)
    return Log(facts, reader.close(), reader.head)


class _Tee:
    """The file as the scanner reads it, handing the reader every byte of the file's head once, in order. The
    scanner reads a small file start to end; of a big one, read by worker processes (parallel.py), the reader
    reads the head itself (``rest``)."""

    def __init__(self, f: BinaryIO, reader: Reader) -> None:
        self._f, self._reader, self._fed = f, reader, 0

    def read(self, n: int = -1) -> bytes:
        at = self._f.tell()
        data = self._f.read(n)
        if at <= self._fed < at + len(data) and self._reader.wants:
            self._reader.feed(data[self._fed - at:])
            self._fed = at + len(data)
        return data

    def rest(self) -> None:
        self._f.seek(self._fed)
        while self._reader.wants and (data := self._f.read(CHUNK)):
            self._reader.feed(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._f.tell()

    def fileno(self) -> int:
        return self._f.fileno()


def _parse(path: str | Path, reader: Reader | None) -> dict[str, Any]:
    p = Path(path)
    try:
        f = open(p, "rb")  # noqa: SIM115 - closed below; the errors of opening are told apart here
    except FileNotFoundError:
        raise NoSuchFile(p) from None
    except IsADirectoryError:
        raise ConfigError(f"{p}: is a directory", hint="give log files, e.g. DIR/*.out") from None
    except OSError as e:
        raise ConfigError(f"{p}: cannot read ({e.strerror})") from None
    sc = Scanner()
    with f, _no_cyclic_gc():
        tee = _Tee(f, reader) if reader is not None else None
        src = cast(BinaryIO, tee) if tee is not None else f  # a file in all the scanner uses of one
        head = src.read(1)
        try:
            size = os.fstat(f.fileno()).st_size
            sc.feed_file(src, str(p), size)
            if tee is not None:
                tee.rest()
        except OSError as e:
            sc.warnings.append(f"read stopped early: {e.strerror or e}")
        if head in (b"{", b"[") and not sc.records:
            try:
                size = p.stat().st_size
            except OSError:
                size = WHOLE_JSON_MAX + 1
            if size <= WHOLE_JSON_MAX:
                f.seek(0)
                sc.records.extend(results.from_document(f.read(), sc.warnings))
        doc = build(str(path), sc)  # its 16,384 edges' dicts and keys: no cycles either
        del sc  # its tables freed here: the collection that the collector, on again, starts would walk them (3 ms)
    return doc


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """The scan makes millions of short-lived tuples and no cycles; the collector's passes over the facts
    read so far would cost it ~3% of a big file's time. Switched back on after, as it was."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def build(name: str, sc: Scanner) -> dict[str, Any]:
    for r, h in sc.tests.rank_hosts.items():
        sc.nccl.rank_on(r, h)
    nccl = sc.nccl.result()
    tests = sc.tests.result()
    hosts = set(sc.nccl.hosts) | sc.tests.hosts
    if nccl is not None:
        nccl["hosts"] = sorted(hosts)
    warnings = list(sc.warnings)
    horovod, own = sc.horovod.result(), sc.summaries.result()
    if sc.lines == 0:
        warnings.append("empty file")
    elif nccl is None and tests is None and horovod is None and own is None and not sc.records:
        warnings.append("nothing recognised in this file (no NCCL, nccl-tests, Horovod or hpcbench lines)")
    if sc.bad_bytes:
        warnings.append(f"{sc.bad_bytes} bytes are not valid UTF-8 (read as U+FFFD)")
    if sc.cut_lines:
        warnings.append(f"{sc.cut_lines} lines longer than {scan.MAX_LINE} bytes were cut")
    if sc.tests.bad_rows:
        warnings.append(f"{sc.tests.bad_rows} nccl-tests rows could not be read")
    return {
        "file": name,
        "nccl": nccl,
        "nccl_tests": tests,
        "horovod": horovod,
        "hpcbench": own,  # its summary lines (workloads/summary.py); its records are under "records"
        "records": sc.records,
        "hosts": sorted(hosts),
        "launcher_prefix": sc.launcher_prefix(),
        "warnings": warnings,
    }
