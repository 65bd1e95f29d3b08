"""A checkpoint whose checksums match but whose content is wrong (issue 25 item 15):
checkpoint.find with runs/checkpoint_tree's ``check`` passes over the newest with one line
naming it and what is wrong, and refuses it named directly (a resume meeting it:
tests/command/test_checkpoint_content.py)."""

from __future__ import annotations

import numpy
import pytest

from trainer_run.runs import checkpoint_tree as saved
from trainer_run.storage import checkpoint


def _run_state(iteration):
    return {"config": {}, "choices": {}, "trainer": {
        "elapsed_time": 1.0, "updater": {
            "iteration": iteration, "iterators": {}, "optimizers": {}, "optimizer_states": {},
            "models": {"main": {"W": numpy.ones((2, 3), numpy.float32)}}}}}


@pytest.mark.parametrize("damage, problem", [
    (lambda s: s["trainer"].pop("updater"), "it holds no trainer/updater object"),
    (lambda s: s["trainer"].update(elapsed_time="1"), "its trainer/elapsed_time is '1', not a number"),
    (lambda s: s["trainer"]["updater"].update(iteration=True),
     "its trainer/updater/iteration is True, not a non-negative integer"),
    (lambda s: s["trainer"]["updater"].pop("iterators"), "its trainer/updater/iterators is not an object"),
    (lambda s: s["trainer"]["updater"]["models"].update(main={"W": 1}),
     "its trainer/updater/models/main is not an object of arrays"),
])
def test_find_passes_over_a_checkpoint_its_check_refuses(tmp_path, damage, problem):
    checkpoint.save(_run_state(10), tmp_path, 10)
    state = _run_state(20)
    damage(state)
    newest = checkpoint.save(state, tmp_path, 20)
    told = []
    found = checkpoint.find(tmp_path, report=told.append, require=checkpoint.RUN_STATE, check=saved.check)
    assert found == tmp_path / "iter_00000010"
    assert told == [f"checkpoint {newest} is malformed: {problem}; skipping it"]
    with pytest.raises(checkpoint.CheckpointError) as caught:
        checkpoint.find(newest, check=saved.check)
    assert str(caught.value) == f"checkpoint {newest} is malformed: {problem}"
    assert checkpoint.find(tmp_path) == newest  # no check: content is the caller's to judge
