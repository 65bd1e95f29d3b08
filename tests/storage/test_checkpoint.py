"""Checkpoint files: plain JSON + npz, atomic pointer, retention, finding one to resume."""

import json
from pathlib import Path

import numpy as np
import pytest

from trainer_run.errors import ConfigError
from trainer_run.runs import directory as run_directory
from trainer_run.storage import checkpoint


def _state(i):
    return {"iteration": i, "nested": {"w": np.arange(6.0).reshape(2, 3) * i, "none": None,
                                        "list": [np.ones(2, np.int32), 1.5, "x"]},
            "rng": np.random.default_rng(i).bit_generator.state}


def test_round_trip_without_pickle(tmp_path):
    path = checkpoint.save(_state(3), tmp_path, 3)
    assert path.name == "iter_00000003"
    with np.load(path / "arrays.npz", allow_pickle=False) as data:
        assert sorted(data.files) == ["nested/list/0", "nested/w"]
    json.loads((path / "state.json").read_text())
    loaded = checkpoint.load(path)
    np.testing.assert_array_equal(loaded["nested"]["w"], _state(3)["nested"]["w"])
    assert loaded["nested"]["list"][1:] == [1.5, "x"] and loaded["nested"]["none"] is None
    assert loaded["rng"] == _state(3)["rng"]


def test_retention_keeps_the_newest_and_latest_points_to_the_last(tmp_path):
    for i in range(1, 6):
        checkpoint.save(_state(i), tmp_path, i, keep=2)
    assert [p.name for p in checkpoint.list_checkpoints(tmp_path)] == ["iter_00000004", "iter_00000005"]
    assert (tmp_path / "latest").read_text().strip() == "iter_00000005"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_find_prefers_latest_and_falls_back_to_the_newest_complete(tmp_path):
    run = tmp_path / "run"
    for i in (1, 2, 3):
        checkpoint.save(_state(i), run / "checkpoints", i)
    assert checkpoint.find(run).name == "iter_00000003"
    (run / "checkpoints" / "iter_00000003" / "arrays.npz").write_bytes(b"truncated")
    assert checkpoint.find(run).name == "iter_00000002"
    (run / "checkpoints" / "latest").unlink()
    assert checkpoint.find(run / "checkpoints").name == "iter_00000002"
    assert checkpoint.find(run / "checkpoints" / "iter_00000001").name == "iter_00000001"
    assert run_directory.owner(checkpoint.find(run)) is None  # no record: not a run
    (run / ".hydra").mkdir()
    (run / ".hydra" / "config.sig").write_text("hmac-sha256:0\n")  # not this user's signature
    assert run_directory.owner(checkpoint.find(run)) is None
    run_directory.mark(run / ".hydra")
    assert run_directory.owner(checkpoint.find(run)) == run.resolve()


@pytest.mark.parametrize("make", ["missing", "empty", "corrupt"])
def test_unusable_resume_targets_are_config_errors(tmp_path, make):
    target = tmp_path / "run"
    if make != "missing":
        (target / "checkpoints" / "iter_00000001").mkdir(parents=True)
    if make == "corrupt":
        (target / "checkpoints" / "iter_00000001" / "state.json").write_text("{not json")
    with pytest.raises(ConfigError, match="resume="):
        checkpoint.find(target)


def test_saving_the_same_iteration_again_replaces_it_cleanly(tmp_path):
    checkpoint.save(_state(1), tmp_path, 4)
    checkpoint.save(_state(2), tmp_path, 4)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["iter_00000004", "latest"]
    np.testing.assert_array_equal(checkpoint.load(tmp_path / "iter_00000004")["nested"]["w"],
                                  _state(2)["nested"]["w"])


def test_load_weights_from_a_model_file_or_a_checkpoint_is_one_call(tmp_path):
    """trainer_run.load_weights takes a model file and a checkpoint directory alike; a model of
    another shape is refused naming the parameter, with nothing copied."""
    from trainer_run import load_weights
    from trainer_run.backend import get_backend
    from trainer_run.errors import ConfigError
    from trainer_run.models import MLP

    source = MLP(3, 2, get_backend("numpy", seed=1), hidden_sizes=[4])
    saved = {k: p.data.copy() for k, p in source.params().items()}
    np.savez(tmp_path / "model.npz", **saved)
    checkpoint.save({"trainer": {"updater": {"models": {"main": saved}}}}, tmp_path / "ck", 7)
    for path in (tmp_path / "model.npz", tmp_path / "ck" / "iter_00000007"):
        target = MLP(3, 2, get_backend("numpy", seed=2), hidden_sizes=[4])
        assert load_weights(target, path).path == path
        for k, p in target.params().items():
            np.testing.assert_array_equal(p.data, saved[k])
    wider = MLP(3, 2, get_backend("numpy"), hidden_sizes=[5])
    with pytest.raises(ConfigError, match=r"model.npz does not fit the model: saved parameter l1/W has shape "
                                          r"\(4, 3\), the model has \(5, 3\)"):
        load_weights(wider, tmp_path / "model.npz")
    assert np.all(wider.l1.b.data == 0)  # nothing copied before the mismatch was found


def test_load_weights_refuses_a_pickled_model_file(tmp_path):
    import pickle

    from trainer_run import load_weights
    from trainer_run.backend import get_backend
    from trainer_run.errors import ConfigError
    from trainer_run.models import MLP

    marker = tmp_path / "executed"
    (tmp_path / "model.npz").write_bytes(pickle.dumps(_Touch(marker)))
    with pytest.raises(ConfigError, match="model.npz cannot be read"):
        load_weights(MLP(3, 2, get_backend("numpy")), tmp_path / "model.npz")
    assert not marker.exists()


class _Touch:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


def test_a_copy_moved_aside_by_a_killed_resave_is_put_back(tmp_path):
    """A kill between the two renames of a re-save leaves iter_N only as .old-iter_N-<pid>;
    the next save puts it back (and drops leftovers of killed writers)."""
    checkpoint.save(_state(1), tmp_path, 1)
    (tmp_path / "iter_00000001").rename(tmp_path / ".old-iter_00000001-999999")
    (tmp_path / ".latest.tmp-999999").write_text("x")
    (tmp_path / ".tmp-iter_00000002-999999").mkdir()
    checkpoint.save(_state(2), tmp_path, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["iter_00000001", "iter_00000002", "latest"]
    assert checkpoint.is_complete(tmp_path / "iter_00000001")


def test_a_latest_file_that_is_not_text_is_reported_and_the_newest_valid_one_used(tmp_path):
    run = tmp_path / "run"
    for i in (1, 2, 3):
        checkpoint.save(_state(i), run / "checkpoints", i)
    (run / "checkpoints" / "iter_00000003" / "state.json").write_text("{}")  # fails its checksum
    latest = run / "checkpoints" / "latest"
    latest.write_bytes(b"\xff")
    reports = []
    assert checkpoint.find(run, report=reports.append) == run / "checkpoints" / "iter_00000002"
    assert reports[0] == f"{latest} does not hold a checkpoint name (it is not UTF-8 text); " \
                         "using the newest valid checkpoint"
    assert reports[1].startswith(f"checkpoint file {run / 'checkpoints' / 'iter_00000003' / 'state.json'} "
                                 "does not match its checksum")
    assert len(reports) == 2


@pytest.mark.parametrize("content, problem", [("", "is empty"),
                                               ("iter_00000009\n", "names iter_00000009, which is not "
                                                                   "a checkpoint there")])
def test_an_empty_or_dangling_latest_is_reported_too(tmp_path, content, problem):
    for i in (1, 2):
        checkpoint.save(_state(i), tmp_path, i)
    (tmp_path / "latest").write_text(content)
    reports = []
    assert checkpoint.find(tmp_path, report=reports.append) == tmp_path / "iter_00000002"
    assert reports == [f"{tmp_path / 'latest'} {problem}; using the newest valid checkpoint"]


def test_retention_orders_checkpoints_by_iteration_past_eight_digits(tmp_path):
    (tmp_path / "iter_backup").mkdir()  # not a checkpoint name: never listed, never pruned
    iterations = [99_999_998, 99_999_999, 100_000_000, 100_000_001]
    for i in iterations:
        checkpoint.save({"iteration": i}, tmp_path, i, keep=2)
    assert [p.name for p in checkpoint.list_checkpoints(tmp_path)] == ["iter_100000000", "iter_100000001"]
    assert (tmp_path / "iter_backup").is_dir()
    (tmp_path / "latest").unlink()
    assert checkpoint.find(tmp_path) == tmp_path / "iter_100000001"
    assert checkpoint.load(tmp_path / "iter_100000001") == {"iteration": 100_000_001}
