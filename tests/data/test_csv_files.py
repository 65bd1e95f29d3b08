"""CSV tables (data/csv_files.py): an empty label cell is refused naming its row, with or without a
header and in the validation table; an empty feature cell is NaN; a feature beyond float32 is
refused naming the cell."""

import numpy as np
import pytest

from trainer_run.data import csv_files
from trainer_run.errors import ConfigError


def _table(tmp_path, rows, header="a,b,y"):
    path = tmp_path / "t.csv"
    path.write_text("".join(f"{r}\n" for r in ([header] if header else []) + rows))
    return str(path)


@pytest.mark.parametrize("last", ["3,4,", "3,4, ", '3,4,""'])
@pytest.mark.parametrize("labels", ["0 1", "a b", "0.5 1.5"])
def test_an_empty_label_cell_is_refused_naming_its_row(tmp_path, labels, last):
    names = labels.split()
    path = _table(tmp_path, [f"{i},{i},{names[i % 2]}" for i in range(10)] + [last])
    with pytest.raises(ConfigError) as e:
        csv_files.csv(path, target="y")
    assert str(e.value) == (f"path={path}: the target column 'y' is empty in row 12; an empty cell "
                            "is NaN and a label cannot be: fill it or drop the row")


def test_an_empty_label_cell_without_a_header_and_in_the_validation_table(tmp_path):
    path = _table(tmp_path, ["1,2,0", ",3,1", "4,5,"], header=None)
    with pytest.raises(ConfigError, match=r"the target column 2 is empty in row 3;"):
        csv_files.csv(path)
    train = _table(tmp_path, ["1,2,0", "2,3,1"])
    (tmp_path / "v.csv").write_text("a,b,y\n1,2,\n")
    with pytest.raises(ConfigError, match=r"^val_path=.*v\.csv: the target column 'y' is empty in "
                       "row 2"):
        csv_files.csv(train, val_path=str(tmp_path / "v.csv"))


def test_an_empty_feature_cell_is_still_nan(tmp_path):
    x, y = csv_files.csv(_table(tmp_path, ["1,,0", "2,3,1"])).train
    assert np.isnan(x[0, 1]) and y.tolist() == [0, 1]


@pytest.mark.parametrize("cell", ["1e39", "-4e38", "1e300"])
def test_a_feature_beyond_float32_is_refused_naming_the_cell(tmp_path, cell):
    path = _table(tmp_path, ["1,2,0", f"2,{cell},1", "3,4,0"])
    with pytest.raises(ConfigError) as e:
        csv_files.csv(path)
    assert str(e.value) == (f"path={path}: column 'b' holds {float(cell):g} in row 3, beyond the "
                            "range of float32 (largest 3.403e+38) that features are read in; "
                            "scale it down")
