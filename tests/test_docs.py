"""The documentation: the site builds with --strict (a broken link or a missing page fails), its reference pages
follow the declarations they are written from, the tutorial's steps and outputs still match what the commands
print, and the README stays short."""
from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys

import pytest
from conftest import REPO

from hpcbench.cli import docgen
from hpcbench.plan import checks, fields


def test_the_site_builds_strict_with_every_generated_reference_page(tmp_path):
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=REPO,
                          check=False, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for page in docgen.PAGES:
        html = site / page.replace(".md", ".html")
        assert html.is_file(), f"{page} was not built"
    sweep = (site / "reference" / "sweep.html").read_text()
    assert all(f"<code>{p.name}</code>" in sweep for p in fields.PARAMS if p.where != "derived")
    cli = (site / "reference" / "cli.html").read_text()
    assert "<code>--html</code>" in cli and 'id="history"' in cli
    # No page fetches anything when viewed: no CDN font, no script from another host.
    for page in site.rglob("*.html"):
        text = page.read_text()
        assert "fonts.googleapis" not in text and '<script src="http' not in text, page


def test_the_sweep_reference_changes_when_a_field_is_added(monkeypatch):
    before = docgen.sweep_page()
    new = fields.Param("bucket_mb", 25, checks.integer(1), "DDP's gradient bucket size in MiB", type=int,
                       kinds=fields.TRAIN, quiet=True)
    monkeypatch.setattr(fields, "PARAMS", (*fields.PARAMS, new))
    after = docgen.sweep_page()
    assert "bucket_mb" not in before
    row = next(line for line in after.splitlines() if line.startswith("| `bucket_mb` |"))
    assert row == ("| `bucket_mb` | int | `25` | `integer ≥ 1` | train | may vary "
                   "| DDP's gradient bucket size in MiB (quiet) |")


def test_every_verb_and_option_is_in_the_cli_reference():
    from hpcbench.cli import VERBS, build_parser

    page = docgen.cli_page()
    sub = next(a for a in build_parser([])._actions if a.dest == "command")
    for name, *_ in VERBS:
        assert f"\n## {name}\n" in page
        for action in sub.choices[name]._actions:
            if action.help == argparse.SUPPRESS:  # a hidden test hook, not an option for users
                continue
            for opt in action.option_strings:
                if opt not in ("-h", "--help"):
                    assert f"`{opt}`" in page.split(f"\n## {name}\n")[1].split("\n## ")[0], (name, opt)


def test_every_rule_and_its_findings_are_in_the_rules_reference():
    from hpcbench.explain.rules import groups

    page = docgen.rules_page()
    for g in groups():
        for fn in g.rules:
            assert f"### `{fn.__name__}`" in page
    for rule in ("straggler", "one-host", "oversubscribed", "timeline", "nccl-env", "comm-share"):
        assert f"| `{rule}` |" in page, rule
    # evidence and fix as the rule writes them
    assert "`result.json timeline`" in page and "set [workload] timeline = false" in page


def test_the_record_reference_has_every_field_with_its_comment():
    from hpcbench.records import ResultRecord

    page = docgen.records_page()
    for f in dataclasses.fields(ResultRecord):
        assert f"| `{f.name}` |" in page
    assert "| `throughput` | `float` | required | samples/s over all ranks" in page


def test_the_links_reference_has_every_link_with_its_source():
    from hpcbench.explain.links import table

    page = docgen.links_page()
    for e in table():
        assert e["name"].replace("|", "\\|") in page and e["source"] in page


def test_readme_is_short_and_its_links_into_the_docs_resolve():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    import re

    for target in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (REPO / target).is_file() or target.removeprefix("docs/") in docgen.PAGES, target


@pytest.mark.slurm
def test_the_tutorial_still_matches_what_its_commands_print(tmp_path, slurm_cluster):
    """scripts/tutorial.py does the lab again; its steps, commands and the first line of every output (figures
    masked) must be the committed page's: a changed command, verb or output fails here until the page is
    written again with the script."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import tutorial
    finally:
        sys.path.pop(0)
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "tutorial.py"), "--out", str(tmp_path)],
                          check=False, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    fresh = (tmp_path / "tutorial.md").read_text()
    committed = (REPO / "docs" / "tutorial.md").read_text()
    assert tutorial.skeleton(fresh) == tutorial.skeleton(committed), \
        "docs/tutorial.md is stale: run .venv/bin/python scripts/tutorial.py and commit what it writes"
    assert (tmp_path / "img" / "report.png").stat().st_size > 20_000
    # the run it made is in its output: four points, all completed, with intervals
    assert fresh.count(" COMPLETED ") >= 4 and "±" in fresh
