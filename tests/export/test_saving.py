"""An export written: where it goes by default, the file read back equal to what was exported,
and nothing written when the export or the place is refused."""

from __future__ import annotations

from pathlib import Path

import numpy
import onnx
import pytest
from export_models import backend, built, randomized, trained
from helpers import load_npz

from trainer_run.errors import ConfigError
from trainer_run.export import default_path, save
from trainer_run.runs.weights import Weights


def test_the_default_file_is_in_the_runs_export_folder_named_by_the_weights(tmp_path):
    assert default_path(tmp_path, Weights(tmp_path / "model.npz", "last", 60), "onnx") == \
        tmp_path / "export" / "model_last_iter60.onnx"
    assert default_path(tmp_path, Weights(Path("x.npz"), "file"), "npz") == \
        tmp_path / "export" / "model_x.npz"
    # a file's weights are named for the file: the EMA's and SWA's exports keep apart
    named = {default_path(tmp_path, Weights(tmp_path / f"model_{kind}.npz", "file"), "onnx")
             for kind in ("ema", "swa")}
    assert named == {tmp_path / "export" / "model_ema.onnx", tmp_path / "export" / "model_swa.onnx"}
    assert default_path(tmp_path, Weights(Path("../a b/../c d.v2.npz"), "file"), "npz") == \
        tmp_path / "export" / "model_c_d_v2.npz"



@pytest.mark.parametrize("iteration", [2**63, -1, 3.0, False, "6", [6], None])
def test_an_iteration_is_a_whole_number_of_a_counters_range(tmp_path, iteration):
    weights = Weights(tmp_path / "model.npz", "last", iteration)
    if iteration is None:
        assert default_path(tmp_path, weights, "npz") == tmp_path / "export" / "model_last.npz"
        return
    with pytest.raises(ConfigError, match=r"summary\.json is damaged: it records .* as the "
                                          r"iteration of the run's last weights"):
        default_path(tmp_path, weights, "npz")
    assert default_path(tmp_path, Weights(tmp_path / "m", "last", 2**63 - 1), "npz").name == \
        f"model_last_iter{2**63 - 1}.npz"


def test_an_unknown_kind_of_weights_names_no_file(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown kind \('\.\./x'\); name the file to write "
                                          "with out=FILE"):
        default_path(tmp_path, Weights(tmp_path / "model.npz", "../x", 6), "npz")

def test_both_formats_are_written_and_read_back(tmp_path):
    loaded = trained(randomized(built("cnn", backend())), "unit")
    run = tmp_path / "run"
    run.mkdir()
    written = save(loaded, "npz", run / "export" / "m.npz", run=run)
    arrays = load_npz(written)  # numpy.load(allow_pickle=False)
    assert all(numpy.array_equal(arrays[k], p.data) for k, p in loaded.model.params().items())
    graph = onnx.load(str(save(loaded, "onnx", tmp_path / "m.onnx")))
    onnx.checker.check_model(graph)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "run"]


@pytest.mark.parametrize(("form", "out", "message"), [
    ("tf", "m.tf", r"^format=tf is unknown; choose one of npz, onnx$"),
    ("onnx", "missing/m.onnx", r"^out=.*missing/m.onnx: the folder .*missing does not exist"),
    ("npz", ".", r"^out=.* is a folder; name the file to write")])
def test_a_refused_export_writes_nothing(tmp_path, form, out, message):
    loaded = trained(built("logistic_regression", backend()), "unit")
    with pytest.raises(ConfigError, match=message):
        save(loaded, form, tmp_path / out)
    assert list(tmp_path.iterdir()) == []
