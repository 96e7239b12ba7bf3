"""Line cleaning: peel launcher labels, timestamps and paste artefacts off a log line, then split an
NCCL ``host:pid:tid [dev]`` prefix from its message.

Real logs reach us through mpirun, srun -l, pdsh, Ray, torchrun, TorchX, Python logging, CloudWatch and
terminal pastes; each adds its own label in front of what the program printed. Only the NCCL prefix
names a host: launcher labels, IPs and prompts never do. The prefix grammar of every release is in
tests/data/catalogue.json (ids ``prefix-*``): NCCL 2.3-2.30 print ``host:pid:tid [dev] NCCL INFO`` (WARN adds
``file:line``, 2.30.7 ``file:line (func)``, TRACE a time, CALL no device), releases before 2.3 print
the same prefix without the ``NCCL`` tag.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from hpcbench.parse.results import MARK

_CTRL = re.compile(r"(?s).{0,3}?[\x00-\x08\n-\x1f]")  # a control character in the first 4
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

# mpirun --tag-output "[1,3]<stdout>:" and horovodrun/Gloo "[3]<stdout>:"; both may also appear mid-line
# when two ranks' output was interleaved without a newline.
TAG = r"\[(\d+)(?:,(\d+))?\]<std(?:out|err)>:"
MPI_TAG = re.compile(TAG)
TS = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"  # ISO time stamp
_LEADERS = [
    MPI_TAG,  # mpirun / horovodrun
    re.compile(r"\[(?:default|rank)(\d+)\]:"),  # torchrun --tee / log prefixes
    re.compile(r"\((?:[\w.:-]+ )?pid=\d+(?:, ip=[\d.]+)?\)\s*"),  # Ray workers
    re.compile(r"\[" + TS + r"\]\s*"),  # [2026-09-01 16:19:24]
    re.compile(TS + r"(?:\s*\|\s*|\s+|:\s+)?"),  # ISO stamps, sometimes glued onto the next token
    re.compile(r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d "),  # syslog "Nov 22 03:27:12 "
    re.compile(r"\s*(\d+): (?=\S)"),  # srun -l "12: "
    re.compile(r"[\w.-]+\s+\|\s(?=\S)"),  # docker compose "svc_1  | "
    re.compile(r"> (?=\S)"),  # quoted paste
    re.compile(r"`+"),  # inline code paste
    re.compile(r"-\s(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s-\s"),  # Python logging "<ts> - INFO - "
]
# A host as NCCL prints it (gethostname() cut at the first '.'), or a placeholder a user pasted instead.
HOST = r"(?:<[^<>\s:]{1,64}>|[A-Za-z0-9_*][\w.*-]*)"
# After "host:pid:tid ": "[dev] " then, for WARN, "file:line " (2.30.7: "file:line (function) "; TRACE: a
# time first) before "NCCL INFO|WARN|TRACE"; before 2.3 the tag is "INFO"/"WARN" alone; "NCCL CALL" has
# no device.
_AFTER_HOST = (r":(\d+):(\d+) (?:\[(\d+)\] (?:[\d.]+ )?(?:[\w./-]+:\d+ (?:\([^()\s]*\) )?)?"
               r"(?=NCCL (?:INFO|WARN|TRACE|ABORT)\b|(?:INFO|WARN) )|(?=NCCL CALL ))")
NCCL_PREFIX = re.compile("(" + HOST + ")" + _AFTER_HOST)
# The same, anywhere in a line: two ranks' output glued together, or an NCCL line glued to other text.
_PREFIX_ANYWHERE = re.compile(r"(?<![\w.*>-])(" + HOST + ")" + _AFTER_HOST)
# Labels peeled only when an NCCL prefix follows, so "Model: ResNet50" and "[0] NCCL INFO" keep their
# meaning: pdsh "label: " (often an IP), a rank tag "[12] " and TorchX "[trainer3]:" / "[trainer0|0]:".
_BEFORE_PREFIX = re.compile(r"(?:[\w.:-]+: |\[(\d+)\]\s+|\[[A-Za-z][\w-]*(?:\|(\d+))?\]:)(?=" + HOST + r":\d+:\d+ )")
RANK_ONLY = re.compile(r"\[(\d+)\] (?=NCCL (?:INFO|WARN))")
_IPV4 = re.compile(r"\d+\.\d+\.\d+\.\d+$")
_MARK = re.compile(r"NCCL (INFO|WARN|TRACE|CALL|ABORT)(?:[ \t]|$)")
_BARE_MARK = re.compile(r"(?:NCCL )?(INFO|WARN|TRACE|CALL|ABORT)(?:[ \t]|$)")  # after a host prefix only


@dataclass(slots=True)
class Line:
    """One cleaned line: what the program printed, and who printed it when the log says so."""

    text: str  # the line without launcher labels and timestamps
    host: str | None = None  # from the NCCL prefix only
    level: str | None = None  # INFO | WARN | ... when the line carries an NCCL marker
    msg: str = ""  # text after the NCCL marker (or the whole text when there is none)
    rank: int | None = None  # from a launcher label (mpirun [1,N], srun -l N:, rank-only [N])
    tag: str | None = None  # the launcher label as printed, e.g. "[1,0]<stdout>:"
    glued: tuple[str, ...] = ()  # hosts of earlier NCCL prefixes on the same line (interleaved output)


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
    m = re.match(TS + r"(?:\s*\|\s*)?", s)
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
        return _with_prefix(Line(text=text), text, m)
    if text.lstrip().startswith("|"):
        text = _cloudwatch(text)
    line = _peeled(text)
    text = line.text
    m = NCCL_PREFIX.match(text)
    if m:
        return _with_prefix(line, text, m)
    m = RANK_ONLY.match(text)
    if m:
        line.rank = int(m.group(1))
        return _split_marker(line, text[m.end():])
    if ("INFO " in text or "WARN " in text or "NCCL " in text) and (m := _PREFIX_ANYWHERE.search(text)):
        return _with_prefix(line, text, m)  # glued after other text: what precedes it is no message
    return _split_marker(line, text)


def clean_plain(text: str) -> Line:
    """``clean(text)`` for a line the fast path found plain, with no launcher tag or time stamp (known.py): a
    host, ":pid:tid [dev] ", one "NCCL INFO" or "NCCL WARN" and a blank, and a message that starts with no
    second prefix. Cut by position, not read by regexes: a 1024-rank job's first communicator is ~18,000
    such lines, each new (tests/test_logs_fastpath.py compares the two on every plain line of the corpus)."""
    text = text.rstrip()
    k = text.index("NCCL ")
    return Line(text=text, host=host_name(text[:text.index(":")]), level=text[k + 5:k + 9], msg=text[k + 10:])


def _peeled(text: str) -> Line:
    """Launcher labels, timestamps and paste marks off the front; the rank and tag they name."""
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
            m = _BEFORE_PREFIX.match(stripped)
            if m:
                if m.group(1) or m.group(2):
                    rank = int(m.group(1) or m.group(2))
                text = stripped[m.end():]
                continue
            text = stripped
            break
    return Line(text=text, rank=rank, tag=tag)


def _with_prefix(line: Line, text: str, m: re.Match[str]) -> Line:
    """The host of the prefix ``m`` and the message after it. When the message is itself another prefix (two
    ranks wrote at once, and the first one's message went to the next line) its host counts too, and the
    message is the one after it. A prefix in the middle of a message is not read: it may be glued to the
    end of a cut word ("cudaDev 1 nvm" + "host:pid:tid"), which would make a host of "nvmhost"."""
    line.host = host_name(m.group(1))
    _split_marker(line, text[m.end():], bare=True)
    while line.msg[:1].isalnum() and (n := NCCL_PREFIX.match(line.msg)):
        if line.host:
            line.glued += (line.host,)
        line.host = host_name(n.group(1))
        _split_marker(line, line.msg[n.end():], bare=True)
    return line


@functools.lru_cache(maxsize=4096)  # a log names few hosts, on every line
def host_name(name: str) -> str | None:
    """An IP or a bare number in the host slot (a launcher rewrote it) names no host."""
    return None if name.isdigit() or _IPV4.match(name) else name


def _split_marker(line: Line, rest: str, bare: bool = False) -> Line:
    """``bare``: after a host prefix, where releases before 2.3 print INFO/WARN without "NCCL"."""
    mk = (_BARE_MARK if bare else _MARK).match(rest)
    if mk:
        line.level = mk.group(1)
        line.msg = rest[mk.end():]
    else:
        line.msg = rest
    return line


WRAP_MIN = 79  # a terminal is at least 80 columns wide; shorter lines were not wrapped
_ROW = re.compile(r"\s*\d+\s+\d+\s")
_WHOLE_EDGE = re.compile(r"\s*(?:Ring|Channel|CollNet|Coll) \d+\S* : .* via ")
NOT_CONTINUATIONS = ("/sec", "NCCL version", MARK)  # a line that holds one is a line of its own
# What a program prints as a line of its own, never the rest of a wrapped one: a progress print ("step 1: loss
# 0.5", "Epoch 3/10", "Iter #2", "loss=0.5", "hpcbench: ..."), a sentence ("Initializing NCCL across 2 nodes"),
# a shell prompt or a rule of "=", "-" or "*".
_OWN_LINE = re.compile(r"[A-Za-z]+ #?\d|[A-Za-z]{2,}[:=]|[A-Z][a-z]+ |[$>] |([=*-])\1\1")
# A terminal cuts at a column, where a training print starts a line of its own; no shape tells every print
# from every rest, so a line is joined only where the message before it shows that it was cut:
# - an edge line whose transport is not whole ("via P2P/IPC/re", "0[1a0"), or whole and extended ("NET/IB/0"
#   + "/GDRDMA"): after "via NET/IB/1/GDRDMA", "step 1: loss 0.5" is a print (issue 25);
# - any other line when the rest starts with a blank (the cut fell on it), as in ddp_7.log.
# A wrapped message of another kind is left cut: rarer, and less harm, than a print glued onto a fact.
_VIA = re.compile(r"\bvia\s+(.+?)\s*$")
_WHOLE_TRANSPORT = re.compile(
    r"(?:P2P/(?:IPC|CUMEM|MNNVL|direct pointer|direct|indirect/\d+\[\d+\])(?:/(?:read|CE))*"
    r"|SHM(?:/(?:direct|CE))*|direct shared memory|NVLS"
    r"|(?:NET|COLLNET)/[A-Za-z][\w ]*/\d+(?:\(\d+\))?(?:/GDRDMA)?(?:\(PCI\))?(?:/Shared)?)")
_EDGE_CUT = re.compile(r"NCCL INFO[ \t]+(?:Channel|Ring|CollNet|Coll) \d+\S* : (?![\d ]*$)")  # not a ring listing


def own_line(cur: str) -> bool:
    """Whether ``cur`` is a line of its own, never the rest of another, whatever the line before it: blank, a
    table row, a whole edge, a prefix, a label or a print of its own (_OWN_LINE). The C scanner (_scan.c)
    tests a part of this, and hands such prints on alone (tests/test_logs_scan.py)."""
    return (not cur.strip() or bool(_ROW.match(cur)) or any(k in cur for k in NOT_CONTINUATIONS)
            or bool(_WHOLE_EDGE.match(cur)) or cur.lstrip().startswith(("#", "[", "NCCL"))
            or bool(NCCL_PREFIX.match(cur)) or bool(_OWN_LINE.match(cur)))


def continues(prev: str, cur: str, before: int) -> bool:
    """Whether ``cur`` is the rest of ``prev``, an NCCL line hard-wrapped by a terminal. ``before``: the
    length of the line before ``prev``. A terminal cuts at its width, so the first part is at least as
    long as the line before it; ``prev`` shows it was cut (above); ``cur`` starts nowhere (own_line). Only
    the three lines decide, so the fast path, which skips most lines, decides alike."""
    if len(prev) < max(WRAP_MIN, before) or "NCCL " not in prev or own_line(cur):
        return False
    if (via := _VIA.search(prev)) is not None:
        if _WHOLE_TRANSPORT.fullmatch(via.group(1)) and not cur.startswith(("/", "(")):
            return False
    elif not _EDGE_CUT.search(prev) and not cur.startswith((" ", "\t")):
        return False
    ln = clean(cur)
    return not (ln.host or ln.level or ln.tag or ln.rank is not None or ln.text != cur.lstrip(" \t"))
