"""Hydra's shell completion through our entry point: the script ``trainer-run -sc install=bash``
prints, eval'd in bash, completes group options and an option's keys (bash asks
``trainer-run -sc query=bash`` with the line in ``COMP_LINE``, as on a real tab)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainer_run.compose.options import OPTIONS, option_section


@pytest.fixture
def bin_dir(tmp_path) -> Path:
    """A folder holding a ``trainer-run`` console script like pip's, for this interpreter."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "trainer-run"
    script.write_text(f"#!{sys.executable}\nfrom trainer_run.cli.entry import main\nmain()\n")
    script.chmod(0o755)
    return folder


def complete(bin_dir: Path, line: str, flag: str = "-sc", cwd: Path | None = None) -> list[str]:
    """What bash offers for ``line`` (a tab at its end) with the installed completion."""
    words = line.split(" ")
    program = f"""
        eval "$(trainer-run {flag} install=bash)" || exit 9
        COMP_LINE="{line}"; COMP_POINT=${{#COMP_LINE}}; COMP_CWORD={len(words) - 1}
        hydra_bash_completion
        printf '%s\\n' "${{COMPREPLY[@]}}"
    """
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(["bash", "-c", program], capture_output=True, text=True, env=env,
                            cwd=cwd or bin_dir, timeout=120)
    assert result.returncode == 0, result.stderr
    return sorted(filter(None, result.stdout.splitlines()))


def test_completes_the_options_of_a_group(bin_dir):
    expected = sorted(f"optimizer={o}" for o in OPTIONS["optimizer"] if o.startswith("ad"))
    assert "optimizer=adam" in expected and len(expected) >= 4
    assert complete(bin_dir, "trainer-run optimizer=ad") == expected


def test_completes_the_keys_of_the_default_option(bin_dir):
    expected = sorted(f"optimizer.{k}=" for k in option_section("optimizer", "adam"))
    assert "optimizer.beta1=" in expected
    assert complete(bin_dir, "trainer-run optimizer.") == expected


def test_completes_presets_with_the_long_flag_where_runs_is_no_folder(bin_dir, tmp_path):
    (tmp_path / "runs").write_text("a file where run folders would go")  # a run would be refused
    expected = sorted(f"experiment={o}" for o in OPTIONS["experiment"])
    assert complete(bin_dir, "trainer-run experiment=", "--shell-completion", tmp_path) == expected
