"""Checkpoint schema and format version: checksum-consistent but malformed checkpoints are
refused with one CheckpointError naming the file, and skipped by ``find``."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from trainer_run.errors import ConfigError
from trainer_run.storage import checkpoint


def _state(i: int) -> dict:
    return {"iteration": i, "nested": {"w": np.arange(6.0).reshape(2, 3) * i, "list": [np.ones(2), "x"]}}


def _run_state(i: int) -> dict:
    return {"config": {"lr": 0.1}, "choices": {"optimizer": "sgd"},
            "trainer": {"updater": {"iteration": i, "models": {"main": {"W": np.full(3, float(i))}}}}}


def _rewrite_checksums(ck: Path) -> None:
    """Makes a crafted checkpoint checksum-consistent, so only the schema can tell."""
    digests = {name: hashlib.sha256((ck / name).read_bytes()).hexdigest()
               for name in (checkpoint.STATE, checkpoint.ARRAYS)}
    (ck / checkpoint.CHECKSUMS).write_text(json.dumps({"sha256": digests}))


def _edit_state(ck: Path, edit) -> None:
    tree = json.loads((ck / checkpoint.STATE).read_text())
    (ck / checkpoint.STATE).write_text(json.dumps(edit(tree)))


def _npy(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def _members(ck: Path) -> dict:
    with zipfile.ZipFile(ck / checkpoint.ARRAYS) as z:
        return {name: z.read(name) for name in z.namelist()}


def _write_zip(path: Path, members: dict) -> None:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)


def _set(tree, path, value):
    node = tree
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return tree


MALFORMED = {
    "state.json is a list": (
        lambda ck: (ck / checkpoint.STATE).write_text("[1, 2]"),
        "state.json", "is malformed: it holds a list, not an object"),
    "reference to an array arrays.npz lacks": (
        lambda ck: _edit_state(ck, lambda t: _set(t, ["nested", "w"], {"__array__": "nope"})),
        "state.json", "is malformed: /nested/w refers to array 'nope', which arrays.npz does not hold"),
    "reference that is not a name": (
        lambda ck: _edit_state(ck, lambda t: _set(t, ["nested", "list", 0], {"__array__": 3})),
        "state.json", "is malformed: /nested/list/0 refers to array 3, which arrays.npz does not hold"),
    "format is a string": (
        lambda ck: _edit_state(ck, lambda t: {**t, "format": "1"}),
        "state.json", "is malformed: its 'format' is '1', not a positive integer"),
    "format is zero": (
        lambda ck: _edit_state(ck, lambda t: {**t, "format": 0}),
        "state.json", "is malformed: its 'format' is 0, not a positive integer"),
    "format is a boolean": (
        lambda ck: _edit_state(ck, lambda t: {**t, "format": True}),
        "state.json", "is malformed: its 'format' is True, not a positive integer"),
    "arrays.npz is a plain .npy": (
        lambda ck: (ck / checkpoint.ARRAYS).write_bytes(_npy(np.ones(3))),
        "arrays.npz", "cannot be read (not a zip archive of .npy arrays)"),
    "a member that is not .npy": (
        lambda ck: _write_zip(ck / checkpoint.ARRAYS, {**_members(ck), "notes.txt": b"hello"}),
        "arrays.npz", "cannot be read (member 'notes.txt' is not a .npy array)"),
    "a .npy member that is not an array": (
        lambda ck: _write_zip(ck / checkpoint.ARRAYS, {**_members(ck), "nested/w.npy": b"hello"}),
        "arrays.npz", "cannot be read (member 'nested/w.npy' is not a .npy array"),
    "a truncated .npy member": (
        lambda ck: _write_zip(ck / checkpoint.ARRAYS, {
            **_members(ck), "nested/w.npy": _members(ck)["nested/w.npy"][:-8]}),
        "arrays.npz", "cannot be read (member 'nested/w.npy' holds 40 bytes of data, its header "
                      "describes 48)"),
    "an object array member": (
        lambda ck: _write_zip(ck / checkpoint.ARRAYS, {
            **_members(ck), "nested/w.npy": _npy(np.array([None, 1], dtype=object))}),
        "arrays.npz", "cannot be read (member 'nested/w.npy' holds Python objects, which only "
                      "pickle could load)"),
}


def _crafted(tmp_path: Path, damage, state=_state) -> tuple[Path, Path, Path]:
    """A run whose iter_2 is ``damage``d and re-checksummed; iter_1 is intact."""
    cks = tmp_path / "run" / "checkpoints"
    good = checkpoint.save(state(1), cks, 1)
    bad = checkpoint.save(state(2), cks, 2)
    damage(bad)
    _rewrite_checksums(bad)
    checkpoint.verify(bad)  # crafted, not corrupt: the checksums match
    return tmp_path / "run", good, bad


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_checkpoint_is_refused_naming_the_file_and_skipped_by_find(tmp_path, case):
    damage, name, problem = MALFORMED[case]
    run, good, bad = _crafted(tmp_path, damage)
    expected = f"checkpoint file {bad / name} {problem}"
    for read in (checkpoint.load, checkpoint.load_tree, checkpoint.find):
        with pytest.raises(checkpoint.CheckpointError) as caught:
            read(bad)
        assert isinstance(caught.value, ConfigError)
        assert str(caught.value).startswith(expected), str(caught.value)
    reports = []
    assert checkpoint.find(run, report=reports.append) == good
    assert len(reports) == 1 and reports[0].startswith(expected) and reports[0].endswith("; skipping it")
    np.testing.assert_array_equal(checkpoint.load(good)["nested"]["w"], _state(1)["nested"]["w"])


RUN_MALFORMED = {
    "empty object": (lambda t: {}, "it lacks 'config'"),
    "trainer is a number": (lambda t: {**t, "trainer": 5}, "its 'trainer' is a number, not an object"),
    "config is a list": (lambda t: {**t, "config": []}, "its 'config' is a list, not an object"),
    "choices missing": (lambda t: {k: v for k, v in t.items() if k != "choices"}, "it lacks 'choices'"),
}


@pytest.mark.parametrize("case", list(RUN_MALFORMED))
def test_a_run_checkpoint_needs_config_choices_and_trainer_objects(tmp_path, case):
    edit, problem = RUN_MALFORMED[case]
    run, good, bad = _crafted(tmp_path, lambda ck: _edit_state(ck, edit), state=_run_state)
    expected = f"checkpoint file {bad / checkpoint.STATE} is malformed: {problem}"
    for read in (checkpoint.load, checkpoint.load_tree, checkpoint.find):
        with pytest.raises(checkpoint.CheckpointError) as caught:
            read(bad, require=checkpoint.RUN_STATE)
        assert str(caught.value) == expected
    checkpoint.load(bad)  # the generic layer knows no run keys
    reports = []
    assert checkpoint.find(run, report=reports.append, require=checkpoint.RUN_STATE) == good
    assert reports == [f"{expected}; skipping it"]
    assert checkpoint.load(good, require=checkpoint.RUN_STATE)["trainer"]["updater"]["iteration"] == 1


def test_every_checkpoint_records_its_format_and_one_without_is_format_1(tmp_path):
    ck = checkpoint.save(_state(3), tmp_path, 3)
    assert json.loads((ck / checkpoint.STATE).read_text())["format"] == checkpoint.FORMAT == 1
    assert "format" not in checkpoint.load_tree(ck)
    _edit_state(ck, lambda t: {k: v for k, v in t.items() if k != "format"})  # as written before
    _rewrite_checksums(ck)
    loaded = checkpoint.load(ck)
    assert sorted(loaded) == ["iteration", "nested"] and loaded["iteration"] == 3
    np.testing.assert_array_equal(loaded["nested"]["w"], _state(3)["nested"]["w"])
    with pytest.raises(ValueError, match="'format' is reserved"):
        checkpoint.save({"format": 2}, tmp_path, 4)


def test_a_checkpoint_of_a_newer_format_asks_for_an_upgrade_and_is_not_passed_over(tmp_path):
    run, good, bad = _crafted(tmp_path, lambda ck: _edit_state(ck, lambda t: {**t, "format": 2}))
    expected = (f"checkpoint {bad} was written by a newer trainer-run (format 2; this one reads up "
                "to 1): upgrade trainer-run to resume it")
    for read in (checkpoint.load, checkpoint.load_tree, checkpoint.find):
        with pytest.raises(checkpoint.CheckpointError) as caught:
            read(bad)
        assert str(caught.value) == expected
    reports = []
    with pytest.raises(checkpoint.CheckpointError) as caught:
        checkpoint.find(run, report=reports.append)  # falling back would overwrite newer work
    assert str(caught.value) == expected and reports == []


def test_find_checks_array_headers_without_loading_the_arrays(tmp_path, monkeypatch):
    run, good, bad = _crafted(tmp_path, lambda ck: None)
    monkeypatch.setattr(np, "load", lambda *a, **k: pytest.fail("find loaded array data"))
    assert checkpoint.find(run) == bad


def _model():
    from trainer_run.backend import get_backend
    from trainer_run.models import MLP

    return MLP(3, 2, get_backend("numpy", seed=1), hidden_sizes=[4])


def test_load_weights_refuses_a_npy_file_and_an_npz_with_other_members(tmp_path):
    from trainer_run import load_weights
    from trainer_run.errors import ConfigError

    model = _model()
    saved = {f"{k}.npy": _npy(p.data) for k, p in model.params().items()}
    np.save(tmp_path / "model.npy", np.ones(3))
    _write_zip(tmp_path / "notes.npz", {**saved, "notes.txt": b"hello"})
    for name, reason in [("model.npy", "not a zip archive of .npy arrays"),
                         ("notes.npz", "member 'notes.txt' is not a .npy array")]:
        with pytest.raises(ConfigError) as caught:
            load_weights(_model(), tmp_path / name)
        assert str(caught.value) == (f"{tmp_path / name} cannot be read as a model's weights: "
                                     f"{reason}")


def test_load_weights_from_a_checkpoint_without_model_parameters_names_it(tmp_path):
    from trainer_run import load_weights
    from trainer_run.errors import ConfigError

    ck = checkpoint.save({"trainer": {"updater": {"iteration": 3}}}, tmp_path, 3)
    with pytest.raises(ConfigError) as caught:
        load_weights(_model(), ck)
    assert str(caught.value) == (f"{ck} cannot be read as a model's weights: checkpoint {ck} "
                                 "holds no model parameters (no trainer/updater/models/main)")
