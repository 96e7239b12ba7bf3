"""Every exception class of hpcbench. The CLI prints ``error: <message>`` (plus a hint) and exits with
``exit_code``; nothing else in the package defines an exception."""

from __future__ import annotations

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
