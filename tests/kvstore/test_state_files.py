"""Optimizer states as files (kvstore/state_files.py): a kvstore's saved states are written whole."""

from __future__ import annotations

import pytest
from refused_writes import FULL
from refused_writes import disk_full_for as _disk_full_for
from refused_writes import temporaries as _temporaries

from trainer_run.errors import StorageError


def test_saved_kvstore_optimizer_states_are_written_whole(tmp_path, monkeypatch):
    """The kvstore's save_optimizer_states goes through the same atomic writer: a refused
    write names the file and leaves the previous states loadable, with no temporary file."""
    import numpy

    from trainer_run import kvstore, optimizers

    kv = kvstore.create("local")
    kv.init(0, numpy.ones(4, dtype=numpy.float32))
    kv.set_optimizer(optimizers.create("sgd", learning_rate=0.1, momentum=0.9))
    kv.push(0, numpy.full(4, 0.5, dtype=numpy.float32))
    target = tmp_path / "states.npz"
    kv.save_optimizer_states(target)
    before = target.read_bytes()
    kv.push(0, numpy.full(4, 0.25, dtype=numpy.float32))
    _disk_full_for(monkeypatch, "states.npz")
    with pytest.raises(StorageError) as caught:
        kv.save_optimizer_states(target)
    assert str(caught.value) == f"cannot write {target}: {FULL}"
    assert target.read_bytes() == before and _temporaries(tmp_path) == []
    monkeypatch.undo()
    kv.load_optimizer_states(target)          # the previous states, still whole
