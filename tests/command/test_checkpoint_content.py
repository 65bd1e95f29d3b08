"""A checkpoint whose checksums match but whose content (or arrays file) is wrong (issue 25 item 15), as
``trainer-run resume=`` meets it: the newest is passed over with one warning naming it and what
is wrong, and the run resumes bit-identically from the previous one; named directly, it is
refused in one line (runs/checkpoint_tree.py, runner/lifecycle.py)."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path

import numpy
import numpy as np
import pytest
from helpers import load_npz, run_cli

from trainer_run.runs import checkpoint_tree as saved
from trainer_run.storage import checkpoint

QUIET = "trainer.progress=false"


SGD = ("optimizer=sgd", "optimizer.learning_rate=0.05", "trainer.log_interval=10",
       "trainer.checkpoint_interval=10", "trainer.keep_checkpoints=null")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A 20-iteration run with checkpoints at 10 and 20, and an uninterrupted 30-iteration one."""
    base = tmp_path_factory.mktemp("content").resolve()
    for name, iterations in (("run", 20), ("straight", 30)):
        result = run_cli(f"hydra.run.dir={base / name}", *SGD, f"trainer.max_iterations={iterations}",
                         QUIET)
        assert result.returncode == 0, result.stderr
    return base / "run", base / "straight"


def _iteration(value):
    def change(state):
        state["trainer"]["updater"]["iteration"] = value
        return f"its trainer/updater/iteration is {value!r}, not a non-negative integer"
    return change


def _first_param_doubled(state):
    params = saved.main_params(state)
    name = next(iter(params))
    good = params[name].shape
    params[name] = numpy.concatenate([params[name], params[name]])
    return f"its parameter {name} has shape {params[name].shape}, the model's has {good}"


CASES = {"iteration not an integer": _iteration("abc"), "negative iteration": _iteration(-5),
         "parameter of another shape": _first_param_doubled}


def _damaged_copy(runs, tmp_path, case):
    run = tmp_path.resolve() / "run"
    shutil.copytree(runs[0], run)
    ck = run / "checkpoints" / "iter_00000020"
    state = checkpoint.load(ck)
    problem = CASES[case](state)
    checkpoint.save(state, ck.parent, 20)  # the checksums match the wrong content
    checkpoint.verify(ck)
    return run, ck, problem


@pytest.mark.parametrize("case", list(CASES))
def test_a_malformed_newest_checkpoint_is_skipped_and_the_resume_is_bit_identical(runs, tmp_path, case):
    run, ck, problem = _damaged_copy(runs, tmp_path, case)
    result = run_cli(f"resume={run}", "trainer.max_iterations=30", QUIET)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"warning: checkpoint {ck} is malformed: {problem}; skipping it"]
    resumed, straight = load_npz(run / "model.npz"), load_npz(runs[1] / "model.npz")
    assert sorted(resumed) == sorted(straight)
    assert all(numpy.array_equal(resumed[k], straight[k]) for k in straight)


@pytest.mark.parametrize("case", list(CASES))
def test_a_malformed_checkpoint_named_directly_is_refused_in_one_line(runs, tmp_path, case):
    run, ck, problem = _damaged_copy(runs, tmp_path, case)
    result = run_cli(f"resume={ck}", "trainer.max_iterations=30", QUIET)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and lines == [f"error: checkpoint {ck} is malformed: {problem}"], \
        result.stderr
    assert [p.name for p in checkpoint.list_checkpoints(ck.parent)] == ["iter_00000010", "iter_00000020"]


def _rewrite_checksums(ck: Path) -> None:
    """Makes a crafted checkpoint checksum-consistent, so only the schema can tell."""
    digests = {name: hashlib.sha256((ck / name).read_bytes()).hexdigest()
               for name in (checkpoint.STATE, checkpoint.ARRAYS)}
    (ck / checkpoint.CHECKSUMS).write_text(json.dumps({"sha256": digests}))


def _npy(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def test_resume_skips_a_malformed_newest_checkpoint_and_refuses_it_named(tmp_path):
    run = tmp_path.resolve() / "run"
    common = ["trainer.progress=false", "trainer.checkpoint_interval=20", "trainer.keep_checkpoints=null"]
    result = run_cli(f"hydra.run.dir={run}", "trainer.max_iterations=40", *common)
    assert result.returncode == 0, result.stderr
    ck = run / "checkpoints" / "iter_00000040"
    (ck / checkpoint.ARRAYS).write_bytes(_npy(np.ones(3)))
    _rewrite_checksums(ck)
    problem = f"checkpoint file {ck / checkpoint.ARRAYS} cannot be read (not a zip archive of .npy arrays)"

    result = run_cli(f"resume={ck}", "trainer.max_iterations=60", *common)
    assert (result.returncode, result.stderr) == (2, f"error: {problem}\n")

    result = run_cli(f"resume={run}", "trainer.max_iterations=60", *common)
    assert (result.returncode, result.stderr) == (0, f"warning: {problem}; skipping it\n")
    assert json.loads((run / "summary.json").read_text())["iteration"] == 60
