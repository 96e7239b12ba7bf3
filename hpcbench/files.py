"""Writing files so that nothing is ever half-written or hidden from the group: a temporary file and a
rename, the caller's umask applied, and a full disk or quota said in one line (errors.NoSpace)."""

from __future__ import annotations

import errno
import functools
import json
import os
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hpcbench.errors import ConfigError, NoSpace

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


def toml(text: str, where: str | Path) -> dict[str, Any]:
    """A TOML document (a sweep, a cluster profile, references); its syntax errors are one ConfigError."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{where}: not valid TOML: {e}", hint="check the line and column named above") from None


def utcnow(timespec: str = "seconds") -> str:
    return datetime.now(timezone.utc).isoformat(timespec=timespec)


@functools.cache
def umask() -> int:
    """This process's umask, read without changing it (os.umask can only be read by setting it)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            return int(next(line.split()[1] for line in f if line.startswith("Umask:")), 8)
    except (OSError, StopIteration, ValueError):
        old = os.umask(0o022)
        os.umask(old)
        return old


FULL = (errno.ENOSPC, errno.EDQUOT)  # a full file system, or a user over quota: the user's to fix, said in one line


def atomic_write_text(path: Path, text: str, mode: int = 0o666) -> None:
    """Write via a temporary file in the same folder and rename, so readers never see half a file.

    The file gets ``mode`` less the umask, as open() would give it: results are for the group to read,
    and mkstemp's private 0600 would hide them.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.fchmod(fd, mode & ~umask())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and e.errno in FULL:
            raise NoSpace(path, e.strerror) from None
        raise


def write_new(path: Path, text: str, mode: int = 0o666) -> None:
    """Create a file that must not exist yet (a fresh run directory): no temporary file needed.
    The kernel applies the umask to ``mode``."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        if e.errno in FULL:
            Path(path).unlink(missing_ok=True)
            raise NoSpace(path, e.strerror) from None
        raise


def atomic_write_json(path: Path, doc: Any) -> None:
    atomic_write_text(path, json.dumps(doc, indent=2, sort_keys=False) + "\n")
