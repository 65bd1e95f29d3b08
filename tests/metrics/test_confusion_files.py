"""The confusion matrix's files (src/trainer_run/metrics/confusion_files.py): the JSON record
holds scikit-learn's layout (rows the true class), the picture is a PNG, and without matplotlib
the data is written alone."""

from __future__ import annotations

import json
import sys

import numpy

from trainer_run.metrics import confusion_files


def test_a_split_gets_its_json_and_picture_in_the_run_folder(tmp_path):
    matrix = numpy.array([[3, 1], [0, 4]])
    confusion_files.ConfusionFiles(tmp_path)("val/", matrix, ["no", "yes"])
    record = json.loads((tmp_path / "confusion" / "val.json").read_text())
    assert record == {"split": "val", "classes": ["no", "yes"], "rows": "true class",
                      "columns": "predicted class", "matrix": [[3, 1], [0, 4]]}
    assert (tmp_path / "confusion" / "val.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_matplotlib_no_picture_is_drawn(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import fails
    assert confusion_files.draw(tmp_path / "m.png", numpy.eye(2, dtype=int), ["a", "b"], "t",
                                tmp_path) is False
    assert not (tmp_path / "m.png").exists()
