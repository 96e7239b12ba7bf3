"""How hpcbench behaves toward the person and the shell around it: file modes under their umask,
closed pipes, paths typed on the command line, files given to the wrong verb, LaTeX that compiles."""
from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA, REPO, write
from report_helpers import make_run, point, record

LOGS = DATA / "logs"


def _run(args: list[str], cwd: Path, umask: int | None = None, stdout: int | None = None,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    def set_umask() -> None:
        if umask is not None:
            os.umask(umask)

    return subprocess.run([sys.executable, "-m", "hpcbench", *args], cwd=cwd, preexec_fn=set_umask, text=True,
                          stdout=stdout if stdout is not None else subprocess.PIPE, stderr=subprocess.PIPE,
                          env={**os.environ, **(env or {})}, timeout=300, check=False)


@pytest.mark.parametrize("umask, file_mode, dir_mode, script_mode", [(0o022, 0o644, 0o755, 0o755),
                                                                      (0o027, 0o640, 0o750, 0o750)])
def test_files_follow_the_umask(tmp_path, umask, file_mode, dir_mode, script_mode):
    """Results are for the group to read: never mkstemp's private 0600."""
    run = tmp_path / "run"
    assert _run(["plan", str(REPO / "sweeps" / "local.toml"), "--run-dir", str(run)], tmp_path, umask).returncode == 0
    rd_files = [run / "plan.json", run / "sweep.toml", *run.glob("points/*/point.json")]
    make_run(tmp_path / "made", [(p, record(p, 100.0)) for p in (point(), point(rpn=2))])
    out = tmp_path / "report"
    proc = _run(["summarize", str(tmp_path / "made"), "--out", str(out)], tmp_path, umask)
    assert proc.returncode == 0, proc.stderr
    written = [*rd_files, out / "report.md", out / "records.csv", out / "records.json", out / "scalability.png",
               tmp_path / "made" / "summary.csv"]
    assert {str(f): oct(stat.S_IMODE(f.stat().st_mode)) for f in written} == {str(f): oct(file_mode) for f in written}
    assert stat.S_IMODE(out.stat().st_mode) == dir_mode
    scripts = list(run.glob("points/*/job.sh"))
    assert scripts and all(stat.S_IMODE(s.stat().st_mode) == script_mode for s in scripts)


VERBS = [
    ["parse", *(str(p) for p in sorted(LOGS.glob("nccl_*.log"))[:6])],
    ["check", *(str(p) for p in sorted(LOGS.glob("nccl_*.log"))[:6])],
    ["summarize", str(LOGS), "--no-plots", "--out", "{tmp}/r"],
    ["summarize", str(LOGS), "--no-plots", "--format", "csv", "--out", "{tmp}/r"],
    ["plan", str(REPO / "sweeps" / "scaling.toml"), "--run-dir", "{tmp}/p"],
    ["status", "{tmp}/p"],
    ["env"],
    ["--help"],
]


@pytest.mark.parametrize("argv", VERBS, ids=lambda a: " ".join(a[:2])[:30])
def test_every_verb_exits_quietly_when_its_reader_is_gone(tmp_path, argv):
    """As `hpcbench parse LOGS | head` when head has already exited: no traceback, the shell's SIGPIPE status."""
    if argv[0] == "status":
        assert _run(["plan", str(REPO / "sweeps" / "scaling.toml"), "--run-dir", str(tmp_path / "p")],
                    tmp_path).returncode == 0
    read, write_end = os.pipe()
    os.close(read)  # the reader is gone before the first byte: every write fails with EPIPE
    try:
        proc = _run([a.replace("{tmp}", str(tmp_path)) for a in argv], tmp_path, stdout=write_end)
    finally:
        os.close(write_end)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 141), (proc.returncode, proc.stderr)


def test_a_profile_path_on_the_command_line_is_relative_to_the_current_folder(tmp_path):
    proc = _run(["plan", "sweeps/scaling.toml", "--cluster", "clusters/example-gpu.toml", "--run-dir",
                 str(tmp_path / "r")], REPO)
    assert proc.returncode == 0, proc.stderr
    elsewhere = _run(["plan", str(REPO / "sweeps" / "scaling.toml"), "--cluster", "clusters/example-gpu.toml",
                      "--run-dir", str(tmp_path / "s")], tmp_path)
    assert elsewhere.returncode == 2 and f"{tmp_path}/clusters/example-gpu.toml: no such" in elsewhere.stderr


def test_summarize_of_a_sweep_file_names_its_runs(tmp_path):
    sweep = write(tmp_path / "study.toml", "[workload]\nsteps = 2\n")
    none = _run(["summarize", str(sweep)], tmp_path)
    assert none.returncode == 2 and "this is a sweep file, and ./runs holds no run of it" in none.stderr
    assert _run(["plan", str(sweep)], tmp_path).returncode == 0  # runs/study-<time>
    [run] = list((tmp_path / "runs").iterdir())
    named = _run(["summarize", str(sweep)], tmp_path)
    assert named.returncode == 2 and f"its runs are runs/{run.name}" in named.stderr
    assert len(named.stderr.strip().splitlines()) == 1


def test_parse_table_never_prints_none(tmp_path):
    proc = _run(["parse", *(str(p) for p in sorted(LOGS.glob("nccltests_*.log")))], tmp_path)
    assert proc.returncode == 0 and "None" not in proc.stdout
    assert "no 'Avg bus bandwidth' line" in proc.stdout and "no data rows" in proc.stdout


def test_references_take_ranks_per_node_on_cpu(tmp_path):
    a, b = point(), point(rpn=2)
    rd = make_run(tmp_path / "run", [(a, record(a, 100.0)), (b, record(b, 150.0))])
    refs = write(tmp_path / "refs.toml", "[[reference]]\nmodel = 'mlp'\nbackend = 'gloo'\nnodes = 1\n"
                 "ranks_per_node = 2\nthroughput = [200.0, -0.1, inf]\n")
    proc = _run(["summarize", str(rd.root), "--references", str(refs), "--out", str(tmp_path / "r")], tmp_path)
    assert proc.returncode == 1, proc.stderr  # 150 < 200 * 0.9: a regression, found by ranks_per_node
    assert "-25.0% vs reference" in proc.stdout


OVERFULL = re.compile(r"^Overfull \\hbox \(([\d.]+)pt too wide\)", re.M)
OVERFULL_TOLERANCE_PT = 1.0  # a sliver past the margin nobody sees; the tables ran 558 pt past it


def _pdflatex(folder, name):
    pdflatex = shutil.which("pdflatex")
    assert pdflatex, "pdflatex is missing: scripts/test.sh installs texlive-latex-base"
    tex = subprocess.run([pdflatex, "-interaction=nonstopmode", "-halt-on-error", name], cwd=folder,
                         capture_output=True, text=True, timeout=120, check=False)
    errors = [line for line in tex.stdout.splitlines() if line.startswith("!")]
    assert tex.returncode == 0 and not errors, (name, errors, tex.stdout[-2000:])
    log = (folder / name.replace(".tex", ".log")).read_text(errors="replace")
    wide = [float(w) for w in OVERFULL.findall(log)]
    assert all(w <= OVERFULL_TOLERANCE_PT for w in wide), (name, wide)
    return log


def test_latex_output_compiles_with_pdflatex_and_fits_the_page(tmp_path):
    """The tables, findings and plots of a run with a failure and of the foreign-log corpus: report.tex as written
    beside the plots, and the --format latex fragment \\input into an article with the packages it names. Neither
    may run past the margin (Overfull \\hbox), and every plot written is a figure."""
    a, b, c = point(), point(rpn=2), point(nodes=2, rpn=2)
    rd = make_run(tmp_path / "run", [(a, record(a, 100.0)), (b, record(b, 150.0)), (c, "ranks lost: boom_1 & 50%")])
    for name, src in (("run", str(rd.root)), ("logs", str(LOGS))):
        out = tmp_path / f"r-{name}"
        proc = _run(["summarize", src, "--format", "latex", "--out", str(out)], tmp_path)
        assert proc.returncode in (0, 1), proc.stderr
        first = proc.stdout.splitlines()[0]
        assert first.startswith("% hpcbench") and "\\usepackage{graphicx,longtable,array,lscape}" in first
        written = sorted(p.name for p in out.glob("*.png"))
        assert written and all(f"{{{out.resolve()}/{png}}}" in proc.stdout for png in written)
        report = (out / "report.tex").read_text()
        assert sorted(re.findall(r"\\includegraphics\[[^]]*\]\{([^}]*)\}", report)) == written
        log = _pdflatex(out, "report.tex")
        assert all(f"<{png}, id=" in log for png in written)  # each figure was read
        assert (out / "report.pdf").stat().st_size > 10_000
        (tmp_path / f"{name}.tex").write_text(proc.stdout)
        uses = first[first.index("\\usepackage"):]
        doc = write(tmp_path / f"doc-{name}.tex", "\\documentclass{article}\n\\usepackage[a4paper,margin=2cm]{geometry}\n"
                    f"{uses}\n\\begin{{document}}\n\\input{{{name}}}\n\\end{{document}}\n")
        _pdflatex(tmp_path, doc.name)
        assert all(line.startswith(("%", "\\")) or line.strip() for line in proc.stdout.splitlines())


def test_latex_splits_a_table_too_wide_for_a_landscape_page():
    from hpcbench.report.latex import _table
    from hpcbench.tabular import Table

    wide = Table("wide", "Wide", [f"column{i}" for i in range(12)], [["x" * 30] * 12])
    text = "\n".join(_table(wide))
    assert text.count("\\begin{longtable}") > 1 and "part 1 of" in text and "\\begin{landscape}" in text
    narrow = Table("narrow", "Narrow", ["a", "b"], [["1", "2"]])
    assert "landscape" not in "\n".join(_table(narrow))


@pytest.mark.slurm
def test_the_largest_count_a_sweep_accepts_is_one_sbatch_accepts(tmp_path, slurm_cluster):
    from hpcbench.plan.checks import MAX_COUNT

    def sbatch_says(nodes: int) -> str:
        script = write(tmp_path / f"n{nodes}.sh", f"#!/bin/bash\n#SBATCH --nodes={nodes}\n#SBATCH --time=1\ntrue\n")
        return subprocess.run(["sbatch", "--test-only", str(script)], capture_output=True, text=True,
                              timeout=60, check=False).stderr

    assert "not a valid node count" not in sbatch_says(MAX_COUNT)  # refused for want of nodes, not as a number
    assert "not a valid node count" in sbatch_says(MAX_COUNT + 1)
