"""Every exception class of hpcbench. The CLI prints ``error: <message>`` (plus a hint) and exits with
``exit_code``; nothing else in the package defines an exception."""

from __future__ import annotations

import re
import sys
from pathlib import Path


class HpcbenchError(Exception):
    """An error the user can act on. ``hint`` says what to do about it."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


class ConfigError(HpcbenchError):
    """A sweep file, command-line value or input path is wrong."""


class NoSuchFile(ConfigError):
    """A file or folder the user named does not exist: the one message for that, everywhere."""

    def __init__(self, path: str | Path, what: str = "file", hint: str | None = None):
        super().__init__(f"{path}: no such {what}", hint=hint or "check the path")
        self.path = str(path)


class SchemaError(HpcbenchError):
    """A record has an unknown schema name or version, or cannot be read as one."""


class SchedulerError(HpcbenchError):
    """The scheduler refused or failed a request."""


class ClusterError(HpcbenchError):
    """The local mini cluster could not be started, stopped or queried."""


class RunDirBusy(HpcbenchError):
    """Another hpcbench holds the run directory's lock."""


class NoSpace(HpcbenchError):
    """A file could not be written because its file system is full (or the user is over quota).

    Nothing is half-written: records are written to a temporary file and renamed, ledger lines are
    written whole or taken back."""

    def __init__(self, path: str | Path, strerror: str | None = None):
        strerror = strerror or "No space left on device"
        super().__init__(f"{path}: cannot write: {strerror}",
                         hint=f"free space on that file system (df {Path(path).parent}), then run the same command "
                              "again: a re-run of the sweep with --run-dir submits only what is missing")
        self.path = str(path)


class HistoryError(HpcbenchError):
    """The history database cannot be opened, read or written (locked too long, disk full, not a database)."""


class DataFetchError(HpcbenchError):
    """A data set could not be downloaded (jobs never download; `hpcbench data fetch` does)."""


class BackendUnavailable(HpcbenchError):
    """A rank's node cannot provide the point's framework, backend or device (the rank exits 2)."""


# Horovod is no extra: it is built from source against the torch and MPI of the nodes that run it.
HOROVOD_BUILD = ("HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 pip install --no-build-isolation horovod "
                 "(add HOROVOD_GPU_OPERATIONS=NCCL on GPU nodes; docs/install.md)")
_REQ = re.compile(r"^\s*([A-Za-z0-9_.-]+)(?:[^;]*;(.*))?")
_EXTRA = re.compile(r"\bextra\s*==\s*['\"]([\w-]+)['\"]")
_PYVER = re.compile(r"python_version\s*(<=|>=|<|>|==|!=)\s*['\"](\d+)\.(\d+)['\"]")
_BROAD = ("all", "test")  # extras that bring everything: named only when no narrower one has the package


def requirements() -> list[tuple[str, str | None]]:
    """(package, the extra that brings it, None for a core one) from hpcbench's installed metadata: setup.cfg's
    install_requires and extras_require as pip saw them; [] where hpcbench's metadata is not installed."""
    from importlib.metadata import PackageNotFoundError, requires

    try:
        reqs = requires("hpcbench") or []
    except PackageNotFoundError:
        return []
    out = []
    for r in reqs:
        m = _REQ.match(r)
        v = _PYVER.search(m.group(2) or "") if m else None
        if m and (v is None or _holds(v.group(1), sys.version_info[:2], (int(v.group(2)), int(v.group(3))))):
            extra = _EXTRA.search(m.group(2) or "")
            out.append((m.group(1).lower(), extra.group(1) if extra else None))
    return out


def _holds(op: str, have: tuple[int, ...], bound: tuple[int, int]) -> bool:
    """A python_version marker (tomli; python_version < "3.11") for this Python."""
    return {"<": have < bound, "<=": have <= bound, ">": have > bound, ">=": have >= bound, "==": have == bound,
            "!=": have != bound}[op]


def extra_of(package: str) -> str | None:
    """The narrowest extra of hpcbench that brings ``package``; None when no extra has it."""
    found = [e for name, e in requirements() if e and name == package.lower()]
    return next((e for e in found if e not in _BROAD), found[0] if found else None)


class MissingExtra(HpcbenchError):
    """What the user asked for needs a package this installation lacks: which one, and which extra brings it."""

    def __init__(self, package: str, where: str, python: str | None = None):
        python = python or sys.executable
        extra = extra_of(package)
        if package == "horovod":
            how = HOROVOD_BUILD
        elif extra:
            how = f"{python} -m pip install 'hpcbench[{extra}]' (the {extra} extra)"
        else:
            how = f"{python} -m pip install {package}"
        super().__init__(f"{where}: {package} is needed, and {python} cannot import it", hint=f"install it: {how}")
        self.package = package


def missing_module(e: ModuleNotFoundError, where: str) -> MissingExtra | None:
    """A failed import of an extra's package (or Horovod) as the one-line error that names the extra; None for any
    other module (a bug, shown as one)."""
    top = (e.name or "").split(".")[0]
    return MissingExtra(top, where) if top and (top == "horovod" or extra_of(top)) else None


class InjectedFault(RuntimeError):
    """Raised on purpose (workload.fail_rank / fail_step) to test how failures are reported."""


def read_text(path: str | Path, what: str = "file") -> str:
    """A file's text, or the one error for a file that is missing or cannot be read as text."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NoSuchFile(path, what) from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a {what}", hint="give the path of a file") from None
    except (PermissionError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read {what}: {e}") from None


class NoGpu(HpcbenchError):
    """``doctor --gpu`` found no GPU this Python can use."""
