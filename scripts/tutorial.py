"""Write docs/tutorial.md by doing the scaling lab on the local 2-node Slurm, step by step, with what each
command really printed; and docs/img/report.png, a screenshot of that run's report.html in headless Chromium.

    .venv/bin/python scripts/tutorial.py                 # writes docs/tutorial.md and docs/img/report.png
    .venv/bin/python scripts/tutorial.py --out /tmp/x    # anywhere else (tests/test_docs.py does, and compares)

The commands run in a fresh folder holding a copy of sweeps/ci.toml, as a user would type them there; the folder's
path is written as "~/lab" in the page. tests/test_docs.py runs this script and checks that the page it writes has
the same steps, commands and output headings as the committed one, so the tutorial cannot go stale.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SHOWN_LINES = 40  # an output longer than this is cut, and the page says how many lines were left out

# (text before the command, the command as typed, whether it must exit 0)
STEPS: list[tuple[str, str, bool]] = [
    (("## 1. A cluster to try it on\n\n"
     "`hpcbench minicluster up` starts a real Slurm on this machine: `munged`, `slurmctld` and two `slurmd`, "
     "`node1` and `node2`, both on 127.0.0.1 (as root; it does nothing when they already run). Both nodes share "
     "this host's CPUs, which the report and `explain` will point out."),
     "hpcbench minicluster up", True),
    (("## 2. The study\n\n"
     "`sweeps/ci.toml` asks for DDP over Gloo on the CPU, a small MLP, at 1 and 2 nodes × 1 and 2 ranks per "
     "node: four points. `hpcbench plan` prints the matrix and writes each point's job script without "
     "submitting anything (`runs/<name>-<time>/points/*/job.sh`, plain Slurm scripts you could `sbatch` by hand)."),
     "cat sweeps/ci.toml", True),
    ("", "hpcbench plan sweeps/ci.toml", True),
    (("## 3. Run it\n\n"
     "`--wait` submits the four jobs, follows them with one `squeue` call per poll, and prints the short table "
     "when every point is final. Step time and throughput carry their 95% intervals."),
     "hpcbench sweep sweeps/ci.toml --wait --run-dir runs/lab", True),
    ("`hpcbench status` asks the scheduler again, at any time, and says each point's state and reason:",
     "hpcbench status runs/lab", True),
    (("## 4. The report\n\n"
     "`summarize` reads only the disk: the records, the exit codes, the ledger. It prints every table, and writes "
     "`report.md`, the plots, `records.csv` and, with `--html`, `report.html`: the same report as one web page "
     "with the plots inside, that works offline (see [the report as a web page](howto/web.md))."),
     "hpcbench summarize runs/lab --html --no-history", True),
    (("The report as a browser shows it (`runs/lab/report/report.html`, a screenshot taken by headless Chromium):\n\n"
     "![report.html of this run](img/report.png)\n\n"
     "## 5. Why it scales as it does\n\n"
     "`explain` says first what explains the run: each cause once, with the points it touches, its share of the "
     "step, its fix (the key to change) and the symptoms it explains; then each point on a line, its causes in "
     "order. `--all` shows every finding with its evidence (a log's `file:line`, or the record field it read). On "
     "the minicluster it finds what is true of it: the two \"nodes\" are one host whose two CPUs all ranks share. "
     "Exit status 1 means a finding is an error."),
     "hpcbench explain runs/lab", False),
]

OUTRO = """## Where next

- Run the same lab on a real cluster: [set up a site profile](howto/site-profile.md), then
  `hpcbench sweep sweeps/scaling.toml --cluster mysite --wait`.
- Compare Horovod and DDP over MPI and Gloo: [compare backends](howto/compare-backends.md)
  (`sweeps/backends.toml` is the lab's comparison on the minicluster).
- Follow a cluster over months: [track a cluster over time](howto/history.md).
- Every option of these commands: [the command line reference](reference/cli.md).
"""

HEAD = """# Tutorial: the scaling lab on the minicluster

From nothing to a scaling report and its explanation, on a real 2-node Slurm that runs on this machine. Every
output below is what the command printed when `scripts/tutorial.py` last wrote this page ({date}); the tests run
that script again and fail when a step, a command or an output's shape no longer matches this page.

Before you start: the set-up of [the home page](index.md) (`bash scripts/test.sh` installs Slurm, OpenMPI and
the Python environment; or, for this tutorial alone, `apt-get install slurm-wlm munge` and `bash scripts/demo.sh`
for `.venv`), and a root shell for `minicluster up`. The whole lab takes about {minutes} minute(s).
Commands are typed in a folder of your own (`~/lab` here) holding a copy of `sweeps/ci.toml`.

"""


def run_step(cmd: str, cwd: Path, hpcbench: list[str]) -> tuple[int, str]:
    argv = cmd.split()
    if argv[0] == "hpcbench":
        argv = hpcbench + argv[1:]
    env = dict(os.environ, COLUMNS="120")
    proc = subprocess.run(argv, check=False, cwd=cwd, capture_output=True, text=True, env=env, timeout=900)
    return proc.returncode, (proc.stdout + proc.stderr).replace(str(cwd), "~/lab")


def shown(text: str) -> str:
    lines = text.rstrip("\n").split("\n")
    if len(lines) > SHOWN_LINES:
        lines = lines[:SHOWN_LINES] + [f"... ({len(lines) - SHOWN_LINES} more lines)"]
    return "\n".join(lines)


CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--window-size=1400,1200")


def chromium(profile: Path) -> Any:
    """Debian's headless Chromium (apt: chromium, chromium-driver) under Selenium, with a fresh profile and its
    console kept; tests/test_web.py drives the same."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (binary and driver):
        raise SystemExit("error: install Debian's chromium and chromium-driver (scripts/test.sh does)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=opts, service=Service(executable_path=driver))


def screenshot(html: Path, png: Path, anchor: str = "intra-node-scaling-one-server") -> None:
    """report.html as Chromium draws it at 1400 px wide, from its scaling table on."""
    with tempfile.TemporaryDirectory() as profile:
        browser = chromium(Path(profile))
        try:
            browser.get(html.as_uri())
            browser.execute_script(f"document.getElementById('{anchor}').scrollIntoView()")
            browser.save_screenshot(str(png))
        finally:
            browser.quit()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(REPO / "docs"), help="folder for tutorial.md and img/report.png")
    args = ap.parse_args(argv)
    out = Path(args.out)
    (out / "img").mkdir(parents=True, exist_ok=True)
    hpcbench = [sys.executable, "-m", "hpcbench"]
    parts, start = [], time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        lab = Path(tmp)
        (lab / "sweeps").mkdir()
        shutil.copy(REPO / "sweeps" / "ci.toml", lab / "sweeps" / "ci.toml")
        for text, cmd, must in STEPS:
            if cmd.startswith("cat "):
                rc, output = 0, (lab / cmd.split()[1]).read_text()
            else:
                rc, output = run_step(cmd, lab, hpcbench)
            if must and rc != 0:
                print(output, file=sys.stderr)
                raise SystemExit(f"error: tutorial step {cmd!r} exited {rc}")
            print(f"$ {cmd}  (exit {rc})", file=sys.stderr)
            block = f"```console\n$ {cmd}\n{shown(output)}\n```\n" + (f"\nExit status {rc}.\n" if rc else "")
            parts.append((text + "\n\n" if text else "") + block)
        screenshot(lab / "runs" / "lab" / "report" / "report.html", out / "img" / "report.png")
    minutes = max(1, round((time.monotonic() - start) / 60))
    page = HEAD.format(date=time.strftime("%Y-%m-%d", time.gmtime()), minutes=minutes) + "\n".join(parts) + "\n" + OUTRO
    (out / "tutorial.md").write_text(page, encoding="utf-8")
    print(out / "tutorial.md")
    return 0


def skeleton(page: str) -> list[str]:
    """What must not go stale: the headings, the commands, and the first line of each output with its figures,
    times and ids masked (they differ on every run)."""
    out, lines = [], page.split("\n")
    for i, line in enumerate(lines):
        if line.startswith(("#", "$ ")):
            out.append(line)
            # minicluster up says whether it was up already: that depends on the machine, not on hpcbench
            if line.startswith("$ ") and "minicluster" not in line and i + 1 < len(lines):
                out.append(re.sub(r"\s+", " ", re.sub(r"[0-9a-f]*[0-9][0-9a-fA-FTZ:.,+-]*", "#", lines[i + 1])))
    return out


if __name__ == "__main__":
    raise SystemExit(main())
