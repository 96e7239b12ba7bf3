"""``parse_file(path) -> dict``: the per-file JSON object of ``hpcbench parse``. Never raises on content;
what cannot be read becomes a warning on the file. A missing or unreadable file is a ConfigError
(NoSuchFile for a missing one), as everywhere."""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hpcbench.errors import ConfigError, NoSuchFile
from hpcbench.parse import results
from hpcbench.parse.scan import MAX_LINE, Scanner

WHOLE_JSON_MAX = 64 << 20  # a result.json is small; bigger files are only scanned line by line


def parse_file(path: str | Path) -> dict[str, Any]:
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
        head = f.read(1)
        try:
            size = os.fstat(f.fileno()).st_size
            sc.feed_file(f, str(p), size)
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
    return build(str(path), sc)


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
    if sc.lines == 0 or (sc.lines == 1 and not nccl and not tests):
        warnings.append("empty file" if sc.lines == 0 else "nothing recognised in this file")
    elif nccl is None and tests is None and sc.horovod.result() is None and not sc.records:
        warnings.append("nothing recognised in this file (no NCCL, nccl-tests, Horovod or hpcbench records)")
    if sc.bad_bytes:
        warnings.append(f"{sc.bad_bytes} bytes are not valid UTF-8 (read as U+FFFD)")
    if sc.cut_lines:
        warnings.append(f"{sc.cut_lines} lines longer than {MAX_LINE} bytes were cut")
    if sc.tests.bad_rows:
        warnings.append(f"{sc.tests.bad_rows} nccl-tests rows could not be read")
    return {
        "file": name,
        "nccl": nccl,
        "nccl_tests": tests,
        "horovod": sc.horovod.result(),
        "records": sc.records,
        "hosts": sorted(hosts),
        "launcher_prefix": sc.launcher_prefix(),
        "warnings": warnings,
    }
