"""``trainer-run --hosts FILE``: its checks are one line each, exit 2, nothing written, and with a
host file naming this machine it runs the job that ``mpiexec -n 2`` runs. Hosts on other
machines are ``test_cluster.py``'s."""

from __future__ import annotations

import json

import pytest
from helpers import run_cli

from tests.command.test_cli_dist import COMMON, assert_equals_one_process_of_batch_50


def one_line(done) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


@pytest.mark.parametrize("text, why", [
    ("", "names no host: write one per line, host or host:N"),
    ("# only a comment\n", "names no host: write one per line, host or host:N"),
    ("node1:0\n", "line 1: 'node1:0' is not a host or host:N (N processes, at least 1)"),
    ("node1\nnode2:x\n", "line 2: 'node2:x' is not a host or host:N (N processes, at least 1)"),
    ("node1 node2\n", "line 1: 'node1 node2' is not a host or host:N (N processes, at least 1)"),
], ids=["empty", "comment", "zero", "not-a-number", "two-on-a-line"])
def test_a_host_file_that_is_not_one_host_per_line_is_one_line(tmp_path, text, why):
    hostfile = tmp_path / "hosts"
    hostfile.write_text(text)
    done = run_cli("--hosts", hostfile, "kvstore=dist_sync", f"hydra.run.dir={tmp_path / 'run'}")
    sep = " " if why.startswith("names") else ", "
    assert one_line(done) == f"error: host file {hostfile}{sep}{why}"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("argv, said", [
    (["--hosts"], "error: --hosts needs a host file: trainer-run --hosts hosts.txt kvstore=dist_sync ..."),
    (["--hosts", "{dir}/missing"],
     "error: cannot read the host file {dir}/missing: No such file or directory"),
    (["--hosts", "{dir}/hosts"], "error: --hosts starts one process per slot of the host file, which train "
     "together only with kvstore=dist_sync or dist_async (not local); add kvstore=dist_sync"),
    (["--hosts={dir}/hosts", "kvstore=dist_sync", "optimizer=adamm"],
     "error: optimizer=adamm is not available"),
], ids=["no-file", "missing-file", "local-store", "typo"])
def test_what_hosts_refuses_before_starting_anything(tmp_path, argv, said):
    (tmp_path / "hosts").write_text("localhost:2\n")
    done = run_cli(*(a.format(dir=tmp_path) for a in argv), f"hydra.run.dir={tmp_path / 'run'}")
    assert one_line(done).startswith(said.format(dir=tmp_path))
    assert not (tmp_path / "run").exists()


@pytest.mark.mpi
def test_a_host_file_naming_this_machine_runs_the_job_mpiexec_would(tmp_path):
    pytest.importorskip("mpi4py")
    (tmp_path / "hosts").write_text("# this machine, two ranks\nlocalhost:2\n")
    done = run_cli("--hosts", tmp_path / "hosts", *COMMON, "kvstore=dist_sync", "dataset.batch_size=25",
                   "trainer.max_iterations=30", f"hydra.run.dir={tmp_path / 'two'}")
    assert done.returncode == 0, done.stderr
    assert_equals_one_process_of_batch_50(tmp_path / "two", tmp_path / "one")


@pytest.mark.mpi
def test_the_resume_line_of_a_run_on_hosts_names_the_host_file_and_works(tmp_path):
    pytest.importorskip("mpi4py")
    hosts, run = tmp_path / "hosts", tmp_path / "run"
    hosts.write_text("localhost:2\n")
    done = run_cli("--hosts", hosts, *COMMON, "kvstore=dist_sync", "trainer.max_iterations=100000000",
                   "trainer.max_time=2", f"hydra.run.dir={run}")
    assert done.returncode == 0, done.stderr
    assert f"resume with: trainer-run --hosts {hosts} resume={run}\n" in done.stdout, done.stdout
    stopped = json.loads((run / "summary.json").read_text())["iteration"]
    again = run_cli("--hosts", hosts, f"resume={run}", "trainer.max_time=null",
                    f"trainer.max_iterations={stopped + 10}")
    assert again.returncode == 0, again.stderr
    assert json.loads((run / "summary.json").read_text())["iteration"] == stopped + 10


@pytest.mark.mpi
def test_the_ranks_import_no_module_planted_in_the_folder_the_command_runs_in(tmp_path):
    """``--hosts`` starts each rank with ``python -P -m``: a ``tensorboardX.py`` in the current
    folder is not what the ranks' TensorBoard logger imports, while the job trains."""
    pytest.importorskip("mpi4py")
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("tensorboardX")
    sentinel = tmp_path / "PLANTED"
    (tmp_path / "tensorboardX.py").write_text(f"open({str(sentinel)!r}, 'w').close()\n")
    (tmp_path / "hosts").write_text("localhost:2\n")
    done = subprocess.run([Path(sys.executable).parent / "trainer-run", "--hosts", "hosts", *COMMON,
                           "kvstore=dist_sync", "trainer.max_iterations=4", "logger=[jsonl,tensorboard]",
                           "hydra.run.dir=run"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert not sentinel.exists()
    assert list((tmp_path / "run" / "tensorboard").iterdir())
