"""Safety: corrupt and crafted checkpoints, pickle payloads, architecture mismatch, divergence,
hostile disks, modules planted in a run folder. Nothing a run has written is lost and nothing
untrusted is executed."""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import re
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import load_npz, read_jsonl, run_cli, run_files
from run_folders import QUICK as QUICK_RUN
from run_folders import copy_run, environment, make_run

from trainer_run import optimizers
from trainer_run.errors import ConfigError
from trainer_run.runs.checkpoint_tree import main_params
from trainer_run.storage import checkpoint

QUIET = "trainer.progress=false"


# -- helpers ------------------------------------------------------------------------------------
def run_cli_limited(*args, fsize: int, cwd=None, timeout=300) -> subprocess.CompletedProcess:
    """:func:`helpers.run_cli` in a process that may not write files beyond ``fsize`` bytes
    (a full disk: writes fail with EFBIG instead of killing the process with SIGXFSZ)."""
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run([sys.executable, "-m", "trainer_run.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, preexec_fn=limit)


def _train(out: Path, *args) -> subprocess.CompletedProcess:
    result = run_cli(f"hydra.run.dir={out}", QUIET, *args)
    assert result.returncode == 0, result.stderr
    return result


def _lines(stderr: str) -> list[str]:
    return stderr.strip().splitlines()


def _one_error(result) -> str:
    """The single stderr line of a refused command (asserting it is the only one)."""
    lines = _lines(result.stderr)
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def _same_params(a: Path, b: Path) -> bool:
    x, y = load_npz(a), load_npz(b)
    return sorted(x) == sorted(y) and all(np.array_equal(x[k], y[k]) for k in x)


def _rewrite_checksums(ck: Path) -> None:
    """Makes a crafted checkpoint checksum-consistent (as an attacker would)."""
    digests = {name: hashlib.sha256((ck / name).read_bytes()).hexdigest()
               for name in (checkpoint.STATE, checkpoint.ARRAYS)}
    (ck / checkpoint.CHECKSUMS).write_text(json.dumps({"sha256": digests}))


def _assert_tree_equal(a, b) -> None:
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b)
        for k in a:
            _assert_tree_equal(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, list) and len(a) == len(b)
        for x, y in zip(a, b):
            _assert_tree_equal(x, y)
    else:
        assert a == b and type(a) is type(b)


def _arrays_of(tree) -> list[np.ndarray]:
    if isinstance(tree, np.ndarray):
        return [tree]
    if isinstance(tree, dict):
        return [a for v in tree.values() for a in _arrays_of(v)]
    if isinstance(tree, list):
        return [a for v in tree for a in _arrays_of(v)]
    return []


class Payload:
    """Unpickling this creates the file ``marker`` (harmless proof of code execution)."""

    def __init__(self, marker: Path):
        self.marker = Path(marker)

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _object_array(marker: Path) -> np.ndarray:
    array = np.empty(1, dtype=object)
    array[0] = Payload(marker)
    return array


def _npz_with_object_member(original: dict, key: str, marker: Path) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **{**original, key: _object_array(marker)})  # savez pickles object arrays
    return buffer.getvalue()


@pytest.fixture(scope="module")
def base_run(tmp_path_factory) -> Path:
    """A 20-iteration default run (adam, MLP [64, 64]) with checkpoint iter_00000020.
    Tests copy it before changing anything."""
    out = tmp_path_factory.mktemp("base").resolve() / "run"
    _train(out, "trainer.max_iterations=20")
    assert (out / "checkpoints" / "latest").read_text().strip() == "iter_00000020"
    return out


def _copy_run(base: Path, tmp_path: Path) -> Path:
    out = tmp_path.resolve() / "run"
    shutil.copytree(base, out)
    return out


# -- 1. integrity, library level ----------------------------------------------------------------
def _state(i: int) -> dict:
    return {"iteration": i, "loss": 0.25 * i, "name": "x", "none": None,
            "params": {"W": np.arange(1200, dtype=np.float32).reshape(40, 30) * i,
                       "b": np.full(30, -1.5, np.float64)},
            "order": [np.arange(7, dtype=np.int64), 3, [True, False]]}


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _flip_middle_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _change_a_number(path: Path) -> None:
    tree = json.loads(path.read_text())
    assert tree["iteration"] == 3
    tree["iteration"] = 4
    path.write_text(json.dumps(tree))
    json.loads(path.read_text())  # still valid JSON: only the checksum can tell


CORRUPTIONS = {
    "truncated arrays": ("arrays.npz", _truncate,
                         "checkpoint file {f} does not match its checksum (truncated or modified)"),
    "flipped byte in arrays": ("arrays.npz", _flip_middle_byte,
                               "checkpoint file {f} does not match its checksum (truncated or modified)"),
    "edited number in state": ("state.json", _change_a_number,
                               "checkpoint file {f} does not match its checksum (truncated or modified)"),
    "checksums deleted": ("checksums.json", Path.unlink,
                          "checkpoint {ck} is incomplete: checksums.json is missing"),
    "state deleted": ("state.json", Path.unlink, "checkpoint {ck} is incomplete: state.json is missing"),
    "arrays deleted": ("arrays.npz", Path.unlink, "checkpoint {ck} is incomplete: arrays.npz is missing"),
    "checksums not JSON": ("checksums.json", _truncate, "checkpoint file {f} is corrupt ("),
}


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_a_damaged_checkpoint_is_refused_naming_the_file(tmp_path, case):
    name, damage, message = CORRUPTIONS[case]
    ck = checkpoint.save(_state(3), tmp_path, 3)
    assert checkpoint.is_complete(ck)
    damage(ck / name)
    expected = message.format(f=ck / name, ck=ck)
    assert not checkpoint.is_complete(ck)
    for read in (checkpoint.load, checkpoint.load_tree, checkpoint.verify, checkpoint.find):
        with pytest.raises(checkpoint.CheckpointError) as caught:
            read(ck)
        assert isinstance(caught.value, ConfigError)
        assert str(caught.value).startswith(expected), str(caught.value)


def test_an_intact_checkpoint_loads_what_was_saved(tmp_path):
    ck = checkpoint.save(_state(3), tmp_path, 3)
    assert checkpoint.is_complete(ck)
    assert sorted(p.name for p in ck.iterdir()) == ["arrays.npz", "checksums.json", "state.json"]
    loaded = checkpoint.load(ck)
    _assert_tree_equal(_state(3), loaded)
    assert loaded["params"]["W"].dtype == np.float32 and loaded["order"][0].dtype == np.int64
    assert (tmp_path / "latest").read_text() == "iter_00000003\n"


# -- 2. fallback to the previous complete checkpoint ---------------------------------------------
FALLBACK = ["trainer.checkpoint_interval=20", "trainer.keep_checkpoints=null"]


def test_resume_falls_back_past_a_corrupt_latest_and_stays_bit_identical(tmp_path):
    tmp_path = tmp_path.resolve()
    run, straight = tmp_path / "run", tmp_path / "straight"
    _train(run, "trainer.max_iterations=60", *FALLBACK)
    cks = run / "checkpoints"
    assert [p.name for p in checkpoint.list_checkpoints(cks)] == [
        "iter_00000020", "iter_00000040", "iter_00000060"]
    bad = cks / "iter_00000060" / "arrays.npz"
    _truncate(bad)

    # naming the corrupt checkpoint directly: no fallback, one error naming the file
    result = run_cli(f"resume={cks / 'iter_00000060'}", "trainer.max_iterations=80", QUIET)
    assert result.returncode == 2
    assert _one_error(result) == (f"error: checkpoint file {bad} does not match its checksum "
                                  "(truncated or modified)")
    assert not (cks / "iter_00000080").exists()

    # the run directory: warn, skip iter_60, resume from iter_40 (replaying 40..60)
    result = run_cli(f"resume={run}", "trainer.max_iterations=80", QUIET)
    assert result.returncode == 0, result.stderr
    assert _lines(result.stderr) == [f"warning: checkpoint file {bad} does not match its checksum "
                                     "(truncated or modified); skipping it"]
    _train(straight, "trainer.max_iterations=80", *FALLBACK)
    assert _same_params(run / "model.npz", straight / "model.npz")
    rows, straight_rows = read_jsonl(run / "metrics.jsonl"), read_jsonl(straight / "metrics.jsonl")
    assert [r["iteration"] for r in rows] == [r["iteration"] for r in straight_rows] == [50, 80]
    assert rows[-1]["train/loss"] == straight_rows[-1]["train/loss"]
    assert (cks / "latest").read_text().strip() == "iter_00000080"
    assert checkpoint.is_complete(cks / "iter_00000060")  # rewritten by the replay
    assert json.loads((run / "summary.json").read_text())["iteration"] == 80


def test_resume_with_every_checkpoint_corrupt_is_refused(tmp_path):
    run = tmp_path.resolve() / "run"
    _train(run, "trainer.max_iterations=40", *FALLBACK)
    cks = run / "checkpoints"
    for ck in checkpoint.list_checkpoints(cks):
        _truncate(ck / "arrays.npz")
    result = run_cli(f"resume={run}", "trainer.max_iterations=80", QUIET)
    assert result.returncode == 2
    lines = _lines(result.stderr)
    assert lines[:-1] == [f"warning: checkpoint file {cks / n / 'arrays.npz'} does not match its "
                          "checksum (truncated or modified); skipping it"
                          for n in ("iter_00000040", "iter_00000020")]
    assert lines[-1] == f"error: resume={run}: no complete checkpoint found under {cks}"
    assert "Traceback" not in result.stderr
    assert [p.name for p in checkpoint.list_checkpoints(cks)] == ["iter_00000020", "iter_00000040"]


# -- 3. pickle payloads are never executed ------------------------------------------------------
def test_the_payloads_are_live(tmp_path):
    """Control: the payloads below do run code when unpickled, so their refusal means something."""
    marker = tmp_path / "fired"
    pickle.loads(pickle.dumps(Payload(marker)))
    assert marker.exists()
    marker.unlink()
    blob = _npz_with_object_member({"a": np.ones(2)}, "evil", marker)
    with np.load(io.BytesIO(blob), allow_pickle=True) as data:
        data["evil"]
    assert marker.exists()


@pytest.mark.parametrize("place", ["arrays.npz is a pickle", "object member in arrays.npz",
                                   "state.json is a pickle"])
def test_a_checksum_consistent_pickle_checkpoint_is_refused_unexecuted(tmp_path, base_run, place):
    run = _copy_run(base_run, tmp_path)
    ck = run / "checkpoints" / "iter_00000020"
    marker = tmp_path.resolve() / "pwned"
    if place == "arrays.npz is a pickle":
        bad = ck / "arrays.npz"
        bad.write_bytes(pickle.dumps(Payload(marker)))
    elif place == "object member in arrays.npz":
        bad = ck / "arrays.npz"
        original = load_npz(bad)
        bad.write_bytes(_npz_with_object_member(original, "trainer/updater/models/main/l1/W", marker))
    else:
        bad = ck / "state.json"
        bad.write_bytes(pickle.dumps(Payload(marker)))
    _rewrite_checksums(ck)
    checkpoint.verify(ck)  # crafted, not corrupt: the checksums match

    result = run_cli(f"resume={ck}", "trainer.max_iterations=40", QUIET)
    assert result.returncode == 2
    assert _one_error(result).startswith(f"error: checkpoint file {bad} cannot be read (")
    assert not marker.exists()
    assert [p.name for p in checkpoint.list_checkpoints(run / "checkpoints")] == ["iter_00000020"]


@pytest.mark.parametrize("form", ["object array member", "whole blob pickled"])
def test_set_states_refuses_a_pickled_blob_unexecuted(tmp_path, form):
    marker = tmp_path / "pwned"
    updater = optimizers.get_updater(optimizers.create("sgd", learning_rate=0.1, momentum=0.9))
    weight = np.ones(3, np.float32)
    updater(0, np.ones(3, np.float32), weight)
    before = updater.states[0].copy()
    blob = updater.get_states()
    if form == "object array member":
        with np.load(io.BytesIO(blob), allow_pickle=False) as data:
            original = {k: data[k] for k in data.files}
        assert "states/0/0" in original                 # index 0's first (only) array
        crafted = _npz_with_object_member(original, "states/0/0", marker)
    else:
        crafted = pickle.dumps(Payload(marker))
    with pytest.raises(ValueError, match="pickle"):
        optimizers.get_updater(optimizers.create("sgd", learning_rate=0.1, momentum=0.9)).set_states(crafted)
    with pytest.raises(ValueError, match="pickle"):
        updater.set_states(crafted)
    assert not marker.exists()
    np.testing.assert_array_equal(updater.states[0], before)


# -- 4. architecture mismatch on resume ---------------------------------------------------------
def test_resume_into_another_architecture_is_refused_naming_the_key_and_both_values(tmp_path, base_run):
    # A model field is one of the keys a resume may not change (cli/resume.py FIXED): refused
    # by name before any state is loaded. (The shape check behind it: test_checkpoint.py.)
    run = _copy_run(base_run, tmp_path)
    before = run_files(run)
    result = run_cli(f"resume={run}", "model.hidden_sizes=[32,32]", "trainer.max_iterations=40", QUIET)
    assert result.returncode == 2
    line = _one_error(result)
    assert line == ("error: resume keeps the run's model.hidden_sizes=[64, 64]; model.hidden_sizes=[32, "
                    "32] would make a different run (its checkpoint was trained with the other), so "
                    "start a new one instead")
    assert run_files(run) == before
    assert [p.name for p in checkpoint.list_checkpoints(run / "checkpoints")] == ["iter_00000020"]


# -- 5. divergence ------------------------------------------------------------------------------
DIVERGE = ["optimizer=sgd", "optimizer.learning_rate=1e4", "trainer.checkpoint_interval=2",
           "trainer.max_iterations=100"]


def test_a_diverged_run_stops_with_one_line_naming_the_last_good_checkpoint(tmp_path):
    run = tmp_path.resolve() / "run"
    result = run_cli(f"hydra.run.dir={run}", QUIET, *DIVERGE)
    assert result.returncode == 3
    assert "Traceback" not in result.stderr and "RuntimeWarning" not in result.stderr
    line = _one_error(result)
    match = re.fullmatch(r"error: the training loss is (nan|inf|-inf) at iteration (\d+); the update "
                         r"was not applied\. .*The last good checkpoint is (\S+); resume=(\S+) "
                         r"continues from it", line)
    assert match, line
    bad_iteration, named = int(match[2]), Path(match[3])
    assert Path(match[4]) == run
    assert "updater.nan_policy=skip" in line
    assert named.parent == run / "checkpoints" and named.name.startswith("iter_")
    good_iteration = int(named.name[len("iter_"):])
    assert 0 < good_iteration < bad_iteration

    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "diverged"
    assert summary["iteration"] == bad_iteration - 1  # the bad update was not applied
    checkpoint.verify(named)
    state = checkpoint.load(named)
    assert state["trainer"]["updater"]["iteration"] == good_iteration
    params = main_params(state)
    assert sorted(params) == ["l1/W", "l1/b", "l2/W", "l2/b", "l3/W", "l3/b"]
    assert all(np.isfinite(a).all() for a in _arrays_of(state))
    assert checkpoint.list_checkpoints(run / "checkpoints")[-1] == named
    assert (run / "checkpoints" / "latest").read_text().strip() == named.name


def test_nan_policy_skip_completes_and_counts_the_skipped_steps(tmp_path):
    # A skipped update leaves the parameters as they were (finite), so the snapshot's
    # non-finite guard never fires: the run completes with exit 0.
    run = tmp_path.resolve() / "run"
    result = run_cli(f"hydra.run.dir={run}", QUIET, *DIVERGE, "updater.nan_policy=skip")
    assert result.returncode == 0, result.stderr
    assert "error:" not in result.stderr and "Traceback" not in result.stderr
    rows = read_jsonl(run / "metrics.jsonl")
    assert [r["iteration"] for r in rows] == [50, 100]
    skipped = [r["skipped_steps"] for r in rows]
    assert 0 < skipped[0] <= skipped[1] <= 100 and skipped[0] <= 50
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["iteration"] == 100
    last = run / "checkpoints" / "iter_00000100"
    checkpoint.verify(last)
    state = checkpoint.load(last)
    assert state["trainer"]["updater"]["skipped_steps"] == skipped[1]
    assert all(np.isfinite(a).all() for a in main_params(state).values())


def test_an_unknown_nan_policy_is_refused(tmp_path):
    run = tmp_path / "run"
    result = run_cli(f"hydra.run.dir={run}", QUIET, "updater.nan_policy=explode")
    assert result.returncode == 2
    assert _one_error(result) == "error: updater.nan_policy='explode' is unknown; choose one of stop, skip"
    assert not (run / "checkpoints").exists() and not (run / "metrics.jsonl").exists()


# -- 6. hostile disk ----------------------------------------------------------------------------
def test_a_run_dir_under_a_regular_file_is_refused_creating_nothing(tmp_path):
    tmp_path = tmp_path.resolve()
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory\n")
    result = run_cli(f"hydra.run.dir={blocker / 'run'}", QUIET, cwd=tmp_path)
    assert result.returncode == 2
    assert _one_error(result) == (f"error: cannot write to {blocker / 'run'}: Not a directory; "
                                  "choose a writable hydra.run.dir (or hydra.sweep.dir for -m)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]
    assert blocker.read_text() == "not a directory\n"


@pytest.fixture(scope="module")
def disk_full(tmp_path_factory) -> dict:
    """A 50-iteration run, then a resume to 100 on a 'disk' that refuses files larger than
    half of iter_00000050/arrays.npz. Captures what the failed resume left behind."""
    run = tmp_path_factory.mktemp("disk_full").resolve() / "run"
    _train(run, "trainer.max_iterations=50")
    ck50 = run / "checkpoints" / "iter_00000050"
    limit = (ck50 / "arrays.npz").stat().st_size // 2
    result = run_cli_limited(f"resume={run}", "trainer.max_iterations=100", QUIET, fsize=limit)
    return {"run": run, "result": result, "limit": limit,
            "summary": json.loads((run / "summary.json").read_text())}


@pytest.mark.parametrize("fsize, file", [(0, ".lock"), (64, ".hydra/config.yaml")],
                         ids=["nothing-fits", "the-record-does-not-fit"])
def test_a_disk_full_at_start_gives_one_line_exit_4_and_leaves_nothing(tmp_path, fsize, file):
    """The probe: a disk already full at start gave Hydra's traceback and exit 1."""
    out = tmp_path / "run"
    result = run_cli_limited(f"hydra.run.dir={out}", QUIET, fsize=fsize)
    assert result.returncode == 4
    assert _one_error(result) == (f"error: cannot write {out / file}: File too large; free some "
                                  "space or choose a writable hydra.run.dir")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_full_disk_keeps_the_previous_checkpoint_and_a_later_resume_completes(disk_full, tmp_path):
    run, result = disk_full["run"], disk_full["result"]
    cks = run / "checkpoints"
    assert result.returncode == 4, result.stderr
    assert "Traceback" not in result.stderr
    assert _one_error(result) == (f"error: cannot write {cks / 'iter_00000100' / 'arrays.npz'}: File "
                                  "too large; the previous checkpoint iter_00000050 is intact")
    assert (cks / "latest").read_text().strip() == "iter_00000050"
    checkpoint.verify(cks / "iter_00000050")
    assert checkpoint.load(cks / "iter_00000050")["trainer"]["updater"]["iteration"] == 50
    assert not (cks / "iter_00000100").exists()
    assert sorted(p.name for p in cks.iterdir()) == ["best", "iter_00000050", "latest"]  # no .tmp-*

    result = run_cli(f"resume={run}", "trainer.max_iterations=100", QUIET)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    straight = tmp_path.resolve() / "straight"
    _train(straight, "trainer.max_iterations=100")
    assert _same_params(run / "model.npz", straight / "model.npz")
    assert [r["iteration"] for r in read_jsonl(run / "metrics.jsonl")] == [50, 100]
    assert read_jsonl(run / "metrics.jsonl")[-1]["train/loss"] == \
        read_jsonl(straight / "metrics.jsonl")[-1]["train/loss"]
    assert (cks / "latest").read_text().strip() == "iter_00000100"
    assert json.loads((run / "summary.json").read_text())["status"] == "completed"


def test_a_full_disk_at_the_final_checkpoint_is_not_reported_as_completed(disk_full):
    assert disk_full["result"].returncode == 4
    assert disk_full["summary"]["status"] == "failed"


# -- modules planted in a run folder -------------------------------------------------------------
# The console scripts (and ``python -P``) do not put the current folder on sys.path, as
# ``python -m`` does: a command run from inside a stranger's run folder must not import an
# ``onnx.py`` or a ``matplotlib/`` planted there when it imports its own dependencies later.
PLANTED = ("onnx", "tensorboardX", "mlflow", "matplotlib")
LOAD_AND_EXPORT = ("import sys, trainer_run\nmodel = trainer_run.load_model(sys.argv[1])\n"
                   "from trainer_run import export\n"  # onnx imported now
                   "export.save(model, 'onnx', __import__('pathlib').Path(sys.argv[2]))\n")
IN_THE_RUN = {
    "trainer-export": (["trainer-export", ".", "format=onnx"],
                       "written: export/model_best_iter6.onnx (best weights, iteration 6)"),
    "trainer-eval": (["trainer-eval", ".", "split=val", "metrics=[confusion_matrix]"], "written: eval/"),
    "resume": (["trainer-run", "resume=.", "logger=[jsonl,csv,tensorboard,mlflow,plot]",
                "trainer.max_iterations=9"], "run directory: "),
    "trainer-report": (["trainer-report", ".", "--plot", "{out}/runs.png"], "objective val/loss"),
    "load_model": (["python", "-P", "-c", LOAD_AND_EXPORT, ".", "{out}/model.onnx"], ""),
}


def _console(argv: list[str]) -> list[str]:
    """``argv`` with its program the installed console script (or this Python)."""
    return [sys.executable if argv[0] == "python" else str(Path(sys.executable).parent / argv[0]),
            *argv[1:]]


def _plant_modules(folder: Path, sentinels: Path) -> None:
    """An ``onnx.py``, ``tensorboardX.py``, ``mlflow.py`` and ``matplotlib/__init__.py`` in
    ``folder``, each of which makes ``sentinels/<name>`` when it is imported."""
    for name in PLANTED:
        module = folder / name / "__init__.py" if name == "matplotlib" else folder / f"{name}.py"
        module.parent.mkdir(exist_ok=True)
        module.write_text(f"open({str(sentinels / name)!r}, 'w').close()\n")


def _as_user(keys: Path, argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(_console(argv), cwd=cwd, env=environment(keys), capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def users_run(tmp_path_factory) -> Path:
    """A folder holding this user's key (``keys``) and a 6-iteration run of theirs (``run``)."""
    root = tmp_path_factory.mktemp("planted").resolve()
    make_run(root, root / "keys")
    return root


def test_the_planted_modules_are_live(users_run, tmp_path):
    """The control: Python imports each planted module when the folder is on sys.path."""
    run = copy_run(users_run / "run", tmp_path / "run")
    _plant_modules(run, tmp_path)
    for name in PLANTED:
        _as_user(users_run / "keys", ["python", "-c", f"import {name}"], run)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name in PLANTED) == sorted(PLANTED)


@pytest.mark.parametrize("name", IN_THE_RUN)
def test_a_command_run_inside_a_run_folder_imports_no_module_planted_there(users_run, tmp_path,
                                                                           name):
    run = copy_run(users_run / "run", tmp_path / "run")
    _plant_modules(run, tmp_path)
    argv, said = IN_THE_RUN[name]
    done = _as_user(users_run / "keys", [a.format(out=tmp_path) for a in argv], run)
    assert done.returncode == 0, done.stderr
    assert said in done.stdout
    assert [p.name for p in tmp_path.iterdir() if p.name in PLANTED] == []


def test_the_users_own_model_in_their_folder_still_imports_and_nothing_else_there_does(tmp_path):
    """``+model._target_=my_models.Tiny`` from the folder holding ``my_models.py`` (and an
    ``onnx.py``): trained, exported, evaluated and loaded by the console scripts, with the
    real onnx."""
    from tests.runs.test_trust import MY_MODEL

    (tmp_path / "my_models.py").write_text(MY_MODEL)
    sentinels = tmp_path / "sentinels"
    sentinels.mkdir()
    _plant_modules(tmp_path, sentinels)
    keys = tmp_path / "keys"
    steps = [(["trainer-run", *QUICK_RUN, "+model._target_=my_models.Tiny", "hydra.run.dir=run"],
              "run directory: "),
             (["trainer-export", "run", "format=onnx"], "written: run/export/model_best_iter6.onnx"),
             (["trainer-eval", "run", "split=val"], "written: run/eval/"),
             (["python", "-P", "-c", LOAD_AND_EXPORT, "run", "model.onnx"], "")]
    for argv, said in steps:
        done = _as_user(keys, argv, tmp_path)
        assert done.returncode == 0 and said in done.stdout, done.stderr
    assert list(sentinels.iterdir()) == []
    assert (tmp_path / "model.onnx").read_bytes()[:2] == (tmp_path / "run" / "export" /
                                                         "model_best_iter6.onnx").read_bytes()[:2]
