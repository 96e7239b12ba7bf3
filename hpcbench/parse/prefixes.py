"""Line cleaning: peel launcher labels, timestamps and paste artefacts off a log line, then split an
NCCL ``host:pid:tid [dev]`` prefix from its message.

Real logs reach us through mpirun, srun -l, pdsh, Ray, torchrun, CloudWatch and terminal pastes; each
adds its own label in front of what the program printed. Only the NCCL prefix names a host: launcher
labels, IPs and prompts never do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CTRL = re.compile(r"(?s).{0,3}?[\x00-\x08\n-\x1f]")  # a control character in the first 4
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

# mpirun --tag-output "[1,3]<stdout>:" and horovodrun/Gloo "[3]<stdout>:"; both may also appear mid-line
# when two ranks' output was interleaved without a newline.
MPI_TAG = re.compile(r"\[(\d+)(?:,(\d+))?\]<std(?:out|err)>:")
_TS = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
_LEADERS = [
    re.compile(r"\[(\d+)(?:,(\d+))?\]<std(?:out|err)>:"),  # mpirun / horovodrun
    re.compile(r"\[(?:default|rank)(\d+)\]:"),  # torchrun --tee / log prefixes
    re.compile(r"\((?:[\w.:-]+ )?pid=\d+(?:, ip=[\d.]+)?\)\s*"),  # Ray workers
    re.compile(r"\[" + _TS + r"\]\s*"),  # [2026-09-01 16:19:24]
    re.compile(_TS + r"(?:\s*\|\s*|\s+|:\s+)?"),  # ISO stamps, sometimes glued onto the next token
    re.compile(r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d "),  # syslog "Nov 22 03:27:12 "
    re.compile(r"\s*(\d+): (?=\S)"),  # srun -l "12: "
    re.compile(r"[\w.-]+\s+\|\s(?=\S)"),  # docker compose "svc_1  | "
    re.compile(r"> (?=\S)"),  # quoted paste
    re.compile(r"`+"),  # inline code paste
]
# pdsh "label: " (often an IP) in front of an NCCL prefix; only peeled when an NCCL prefix follows,
# so "Model: ResNet50" keeps its label.
_PDSH = re.compile(r"[\w.:-]+: (?=[A-Za-z0-9_][\w.-]*:\d+:\d+ \[\d+\] )")
NCCL_PREFIX = re.compile(r"([A-Za-z0-9_][\w.-]*):(\d+):(\d+) \[(\d+)\] (?:[\w./-]+:\d+ )?(?=NCCL )")
RANK_ONLY = re.compile(r"\[(\d+)\] (?=NCCL (?:INFO|WARN))")
_IPV4 = re.compile(r"\d+\.\d+\.\d+\.\d+$")
_MARK = re.compile(r"NCCL (INFO|WARN|TRACE|ABORT)\s?")


@dataclass
class Line:
    """One cleaned line: what the program printed, and who printed it when the log says so."""

    text: str  # the line without launcher labels and timestamps
    host: str | None = None  # from the NCCL prefix only
    level: str | None = None  # INFO | WARN | ... when the line carries an NCCL marker
    msg: str = ""  # text after the NCCL marker (or the whole text when there is none)
    rank: int | None = None  # from a launcher label (mpirun [1,N], srun -l N:, rank-only [N])
    tag: str | None = None  # the launcher label as printed, e.g. "[1,0]<stdout>:"


def decode(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    if "\x1b" in text or "\r" in text or "\x00" in text or _CTRL.match(text):
        text = ANSI.sub("", text.replace("\r", ""))
    return text


def split_mid_line_tags(text: str) -> list[str]:
    """Cut a line at every mpirun tag after its start: interleaved ranks share one physical line."""
    if text.count("<std") < 2 and not (text.count("<std") == 1 and not MPI_TAG.match(text.lstrip())):
        return [text]
    cuts = [m.start() for m in MPI_TAG.finditer(text) if m.start() > 0]
    if not cuts:
        return [text]
    parts, prev = [], 0
    for c in cuts:
        parts.append(text[prev:c])
        prev = c
    parts.append(text[prev:])
    return [p for p in parts if p.strip()]


def _cloudwatch(text: str) -> str:
    """'  | <ts> | msg' or '  | <ts>msg | msg' (CloudWatch console copy): keep one copy of msg."""
    s = text.lstrip()
    if not s.startswith("|"):
        return text
    s = s[1:].lstrip()
    m = re.match(_TS + r"(?:\s*\|\s*)?", s)
    if m:
        s = s[m.end():]
    n = len(s)
    if n > 3 and n % 2 == 1:
        k = (n - 3) // 2
        if s[k:k + 3] == " | " and s[:k] == s[k + 3:]:
            s = s[:k]
    return s


def clean(text: str) -> Line:
    """Peel labels until none applies, then read the NCCL prefix."""
    text = text.rstrip()
    m = NCCL_PREFIX.match(text)
    if m:
        return _split_marker(Line(text=text, host=_host(m.group(1))), text[m.end():])
    if text.lstrip().startswith("|"):
        text = _cloudwatch(text)
    rank = tag = None
    for _ in range(8):
        stripped = text.lstrip(" \t")
        for rx in _LEADERS:
            m = rx.match(stripped)
            if m and m.end() > 0:
                if rx is _LEADERS[0]:
                    tag = m.group(0)
                    rank = int(m.group(2) or m.group(1))
                elif rx is _LEADERS[1] or rx is _LEADERS[6]:
                    rank = int(m.group(1))
                text = stripped[m.end():]
                break
        else:
            m = _PDSH.match(stripped)
            if m:
                text = stripped[m.end():]
                continue
            text = stripped
            break
    line = Line(text=text, rank=rank, tag=tag)
    m = NCCL_PREFIX.match(text)
    if m:
        line.host = _host(m.group(1))
        rest = text[m.end():]
    else:
        m = RANK_ONLY.match(text)
        if m:
            line.rank = int(m.group(1))
            rest = text[m.end():]
        else:
            rest = text
    return _split_marker(line, rest)


def _host(name: str) -> str | None:
    """An IP or a bare number in the host slot (a launcher rewrote it) names no host."""
    return None if name.isdigit() or _IPV4.match(name) else name


def _split_marker(line: Line, rest: str) -> Line:
    mk = _MARK.match(rest)
    if mk:
        line.level = mk.group(1)
        line.msg = rest[mk.end():]
    else:
        line.msg = rest
    return line
