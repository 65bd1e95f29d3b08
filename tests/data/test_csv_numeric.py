"""The CSV fast path for all-numeric tables (issue 27): the same arrays as the general path,
bit for bit, on every plain-number table; the general path, with its rules and messages, on
anything else."""

from __future__ import annotations

import numpy
import pytest

from trainer_run.data import csv_files, csv_numeric
from trainer_run.errors import ConfigError


@pytest.fixture
def taken(monkeypatch):
    """The fast path's answers (None: it left the table to the general path), in order."""
    answers = []

    def spy(*args):
        answers.append(csv_numeric.numeric_table(*args))
        return answers[-1]

    monkeypatch.setattr(csv_files, "numeric_table", spy)
    return answers


def general(monkeypatch, **options):
    """The table read by the general path alone (today's reader)."""
    with monkeypatch.context() as m:
        m.setattr(csv_files, "_fast", lambda *args: None)
        return csv_files.csv(**options)


def same(a, b) -> None:
    """Every split of ``a`` and ``b`` holds arrays of the same dtype, shape and bytes."""
    for split in ("train", "val", "test"):
        left, right = getattr(a, split), getattr(b, split)
        assert (left is None) == (right is None)
        for u, v in zip(left or (), right or ()):
            assert u.dtype == v.dtype and u.shape == v.shape
            assert u.tobytes() == v.tobytes()


NUMERIC = {
    "header, int label": "a,b,c,label\n1.5,-2.25e-3,7,3\n0.1,1e10,-0,4\n3.14159265358979,2,1,0\n",
    "no header, no final newline": "1,2,3\n4.5,5.5,6\n-7e-8,8E+3,9",
    "CRLF": "x,y,t\r\n0.333333333333,1.1,5\r\n-1,2.675,6\r\n",
    "spaces around cells": "a,b,t\n 1.25 , 2 ,3\n\t4,5.5 , 6 \n",
    "blank lines and a BOM": "\ufeffa,b,t\n\n1,2,3\n\n4,5,6\n\n",
    "names in UTF-8": "temp\u00e9rature,\u03bb,t\n1,2,3\n4,5,6\n",
    "float target": "a,b,t\n1,2,0.5\n3,4,1e-300\n5,6,-7\n",
    "target beyond int64": "a,b,t\n1,2,3\n3,4,99999999999999999999\n",
    "inf and nan": "a,b,t\ninf,-Infinity,1\nnan,1.0,2\n",
    "denormal and float32's largest": "a,b,t\n1e-45,3.4028234e38,1\n-3.4028235e38,1.17549435e-38,2\n",
}


@pytest.mark.parametrize("text", NUMERIC.values(), ids=NUMERIC.keys())
def test_the_fast_path_reads_plain_numbers_bit_for_bit_as_the_general_path(tmp_path, monkeypatch,
                                                                           taken, text):
    path = tmp_path / "t.csv"
    path.write_bytes(text.encode())
    fast = csv_files.csv(str(path))
    assert taken[0] is not None
    same(fast, general(monkeypatch, path=str(path)))


def test_values_against_hand_written_arrays(tmp_path, taken):
    (tmp_path / "t.csv").write_text("a,b,label\n1.5,-2e-3,3\n0.1,7,4\n")
    x, y = csv_files.csv(str(tmp_path / "t.csv")).train
    assert taken[0] is not None
    numpy.testing.assert_array_equal(x, numpy.array([[1.5, -0.002], [0.1, 7]], numpy.float32))
    assert x.dtype == numpy.float32 and y.dtype == numpy.int64 and y.tolist() == [3, 4]
    (tmp_path / "f.csv").write_text("a,b,t\n1,2,0.5\n3,4,1\n")
    x, y = csv_files.csv(str(tmp_path / "f.csv")).train
    assert y.dtype == numpy.float64 and y.tolist() == [0.5, 1.0] and x.tolist() == [[1, 2], [3, 4]]


def test_many_decimals_round_to_the_float32_nearest_the_double(tmp_path, taken):
    rng = numpy.random.default_rng(3)
    cells = [f"{m:.{d}f}e{e}" for m, d, e in zip(rng.normal(size=3000), rng.integers(1, 20, 3000),
                                                  rng.integers(-40, 39, 3000))]
    rows = [",".join(cells[i:i + 3]) + f",{i % 7}" for i in range(0, 3000, 3)]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    x, y = csv_files.csv(str(tmp_path / "t.csv"), header=False).train
    assert taken[0] is not None
    expected = numpy.array([numpy.float32(float(c)) for c in cells], numpy.float32).reshape(-1, 3)
    assert x.tobytes() == expected.tobytes()
    assert y.tolist() == [i % 7 for i in range(0, 3000, 3)]


def test_small_blocks_and_a_target_turning_float_in_a_later_block(tmp_path, monkeypatch, taken):
    monkeypatch.setattr(csv_numeric, "BLOCK", 50)
    rows = [f"{i * 0.37:.5f},{-i},{i}" for i in range(200)] + ["1,2,2.5"]
    (tmp_path / "t.csv").write_text("a,b,t\r\n" + "\r\n".join(rows))
    fast = csv_files.csv(str(tmp_path / "t.csv"))
    assert taken[0] is not None and fast.train[1].dtype == numpy.float64
    assert fast.train[1].tolist() == list(range(200)) + [2.5]
    same(fast, general(monkeypatch, path=str(tmp_path / "t.csv")))


def test_listed_features_a_target_by_index_a_delimiter_and_the_other_files(tmp_path, monkeypatch,
                                                                           taken):
    for name in ("t", "v", "h"):
        (tmp_path / f"{name}.csv").write_text(
            "".join(f"{i};{i * 1.5};{-i / 3};{i % 2}\n" for i in range(9)))
    options = dict(path=str(tmp_path / "t.csv"), val_path=str(tmp_path / "v.csv"),
                   test_path=str(tmp_path / "h.csv"), target=0, features=[2, 1], delimiter=";")
    fast = csv_files.csv(**options)
    assert len(taken) == 3 and all(a is not None for a in taken)
    assert fast.train[1].tolist() == list(range(9))
    numpy.testing.assert_array_equal(fast.val[0][:, 0], numpy.float32([-i / 3 for i in range(9)]))
    same(fast, general(monkeypatch, **options))


def test_a_feature_listed_twice_is_read_as_today(tmp_path, monkeypatch, taken):
    (tmp_path / "t.csv").write_text("a,b,t\n1,2,3\n4,5,6\n")
    read = csv_files.csv(str(tmp_path / "t.csv"), features=["b", "b", "a"])
    assert read.train[0].tolist() == [[2, 2, 1], [5, 5, 4]]
    same(read, general(monkeypatch, path=str(tmp_path / "t.csv"), features=["b", "b", "a"]))


def test_crlf_lines_across_small_blocks(tmp_path, monkeypatch, taken):
    monkeypatch.setattr(csv_numeric, "BLOCK", 40)
    (tmp_path / "t.csv").write_bytes(NUMERIC["CRLF"].encode() + b"1.5,2.5,7\r\n")
    fast = csv_files.csv(str(tmp_path / "t.csv"))
    assert taken[0] is not None and fast.train[1].tolist() == [5, 6, 7]
    same(fast, general(monkeypatch, path=str(tmp_path / "t.csv")))


GENERAL = {
    "quoted numbers": 'a,b,t\n"1.5",2,3\n4,"5",6\n',
    "class names": "a,b,species\n1,2,setosa\n3,4,virginica\n",
    "an empty cell (NaN)": "a,b,t\n1,,3\n4,5,6\n",
    "a text column": "a,name,b,t\n1,x,2,3\n4,y,5,6\n",
    "underscores": "a,b,t\n1_000,2,3\n4,5,6\n",
    "a lone CR line end": "a,b,t\r1,2,3\r4,5,6\r",
    "non-ASCII": "a,b,t\n1,2,3\n4,5,\u0667\n",
    "a text cell deep in the file": "a,b,t\n" + "1,2,3\n" * 50 + "1,n/a,3\n",
}


@pytest.mark.parametrize("text", GENERAL.values(), ids=GENERAL.keys())
def test_anything_but_plain_numbers_is_read_by_the_general_path(tmp_path, monkeypatch, taken, text):
    monkeypatch.setattr(csv_numeric, "BLOCK", 64)
    path = tmp_path / "t.csv"
    path.write_bytes(text.encode())
    read = csv_files.csv(str(path))
    assert taken == [None]
    same(read, general(monkeypatch, path=str(path)))


def test_quoted_numbers_and_class_names_keep_todays_values(tmp_path):
    (tmp_path / "q.csv").write_text('a,b,species\n"1.5",2,setosa\n4,"5",virginica\n')
    x, y = csv_files.csv(str(tmp_path / "q.csv")).train
    assert x.tolist() == [[1.5, 2], [4, 5]] and y.tolist() == ["setosa", "virginica"]


@pytest.mark.parametrize("text, message", [
    ("a,b,t\n1,2,3\n4,5\n", "path=RAGGED: row 3 has 2 cells and the table 3 columns"),
    ("a,b,t\n1,2,3\n4,5,6,7\n", "path=RAGGED: row 3 has 4 cells and the table 3 columns"),
    ("a,b,t\n", "path=RAGGED holds no rows of data"),
    ("a,b,t,\n1,2,3\n4,5,6\n", "path=RAGGED: row 2 has 3 cells and the table 4 columns"),
])
def test_a_ragged_or_empty_numeric_table_gets_todays_message(tmp_path, taken, text, message):
    path = tmp_path / "r.csv"
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        csv_files.csv(str(path), header=True)
    assert str(error.value) == message.replace("RAGGED", str(path))
    assert taken == [None]


def test_a_target_that_is_no_column_gets_todays_message(tmp_path, taken):
    (tmp_path / "t.csv").write_text("a,b,label\n1,2,3\n")
    with pytest.raises(ConfigError, match="has no column 'species' .its columns are a, b, label"):
        csv_files.csv(str(tmp_path / "t.csv"), target="species")


def test_an_older_numpys_float_as_integer_warning_refuses_the_block(monkeypatch):
    def warns(*args, **options):  # NumPy 1.23 to 1.26 parse "2.0" as 2 with this warning
        import warnings
        warnings.warn("loadtxt(): Parsing an integer via a float is deprecated", DeprecationWarning)
        return numpy.zeros(1, options["dtype"])

    monkeypatch.setattr(numpy, "loadtxt", warns)
    with pytest.raises(ValueError, match="integer via a float"):
        csv_numeric._records(b"1,2.0\n", numpy.dtype([("c0", "f4"), ("c1", "i8")]), ",")
