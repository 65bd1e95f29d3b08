"""trainer_run.storage.states: a state tree flattened to JSON-able data plus its arrays by path
(compared with the flat form written by hand), back through JSON and an .npz archive equal,
arrays bit-equal with their dtypes; what a checkpoint cannot hold found with its path; an
optimizer state's leaves, map and check."""

from __future__ import annotations

import io
import json

import numpy
import pytest

from trainer_run.storage.states import check_state, flatten, map_state, state_leaves, unflatten, unstorable

W = numpy.arange(6, dtype=numpy.float32).reshape(2, 3)
B = numpy.array([-0.0, numpy.nan, numpy.inf], numpy.float64)
STEPS = numpy.array([3, -1], numpy.int64)
MASK = numpy.array([[True], [False]])
TEXT = numpy.array(["a", "éé"])
NAN = numpy.frombuffer(b"\x01\x00\xc0\x7f", numpy.float32)  # a NaN with a payload of its own

TREE = {"models": {"main": {"fc1/W": W, "fc1/b": B}},
        "optimizer": {"states": [STEPS, (MASK, None), ()], "rate": numpy.float32(0.5),
                      "t": numpy.int64(7), "flag": numpy.bool_(True)},
        "rng": {"bit_generator": "PCG64", "seed": 2**70},
        "names": TEXT, 3: "int key", "nan": NAN, "none": None, "x": 1.25}


def test_flatten_moves_each_array_out_under_its_path():
    arrays: dict = {}
    flat = flatten(TREE, arrays)
    assert flat == {"models": {"main": {"fc1/W": {"__array__": "models/main/fc1/W"},
                                        "fc1/b": {"__array__": "models/main/fc1/b"}}},
                    "optimizer": {"states": [{"__array__": "optimizer/states/0"},
                                             [{"__array__": "optimizer/states/1/0"}, None], []],
                                  "rate": 0.5, "t": 7, "flag": True},
                    "rng": {"bit_generator": "PCG64", "seed": 2**70},
                    "names": {"__array__": "names"}, "3": "int key", "nan": {"__array__": "nan"},
                    "none": None, "x": 1.25}
    assert [type(flat["optimizer"][k]) for k in ("rate", "t", "flag")] == [float, int, bool]
    assert arrays.keys() == {"models/main/fc1/W", "models/main/fc1/b", "optimizer/states/0",
                             "optimizer/states/1/0", "names", "nan"}
    assert arrays["models/main/fc1/W"] is W and arrays["optimizer/states/1/0"] is MASK
    assert json.loads(json.dumps(flat, allow_nan=False)) == flat


def through_disk(tree):
    """``tree`` flattened, its data through JSON text and its arrays through an .npz archive,
    and back."""
    arrays: dict = {}
    text = json.dumps(flatten(tree, arrays), allow_nan=False)
    buffer = io.BytesIO()
    numpy.savez(buffer, **arrays)
    buffer.seek(0)
    with numpy.load(buffer, allow_pickle=False) as npz:
        return unflatten(json.loads(text), {k: npz[k] for k in npz.files})


def test_a_tree_comes_back_from_disk_with_its_arrays_bit_equal():
    back = through_disk(TREE)
    fc1 = back["models"]["main"]
    for got, want in ((fc1["fc1/W"], W), (fc1["fc1/b"], B), (back["optimizer"]["states"][0], STEPS),
                      (back["optimizer"]["states"][1][0], MASK), (back["names"], TEXT),
                      (back["nan"], NAN)):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()
    assert back["optimizer"]["states"][1][1] is None and back["optimizer"]["states"][2] == []
    assert back["optimizer"]["rate"] == 0.5 and back["optimizer"]["t"] == 7
    assert back["rng"] == {"bit_generator": "PCG64", "seed": 2**70}
    assert back["3"] == "int key" and back["none"] is None and back["x"] == 1.25


def test_what_json_holds_comes_back_as_json_holds_it():
    """Tuples come back as lists, keys as strings, NumPy scalars as Python's."""
    tree = {"pair": (1, (2.5, "x")), 0: {"k": numpy.float64(0.1)}}
    assert through_disk(tree) == {"pair": [1, [2.5, "x"]], "0": {"k": 0.1}}


def test_unflatten_inverts_flatten_in_memory():
    arrays: dict = {}
    back = unflatten(flatten({"a": [W, {"b": B}], "c": "text"}, arrays), arrays)
    assert back["a"][0] is W and back["a"][1]["b"] is B and back["c"] == "text"


def test_a_tree_of_plain_values_has_no_arrays():
    arrays: dict = {}
    tree = {"a": [1, 2.5, "s", None, True], "b": {}}
    assert flatten(tree, arrays) == tree and arrays == {}
    assert unflatten(tree, {}) == tree


def test_a_tree_that_is_an_array_is_stored_under_the_empty_path():
    arrays: dict = {}
    assert flatten(W, arrays) == {"__array__": ""} and arrays[""] is W


@pytest.mark.parametrize("tree", [TREE, None, 3, "s", numpy.float16(1.5), numpy.str_("x"),
                                  numpy.zeros((0, 2), numpy.complex64), {"a": [], "b": ()}])
def test_a_tree_of_storable_values_has_nothing_unstorable(tree):
    assert unstorable(tree) is None


@pytest.mark.parametrize("tree, where", [
    ({"a": [1, {2}]}, "/a/1 (a value of type set)"),
    ({"a": {"b": (1, object())}}, "/a/b/1 (a value of type object)"),
    ({"names": numpy.array(["a", None])}, "/names (an array of Python objects)"),
    ({"blob": b"bytes"}, "/blob (a value of type bytes)"),
    ({"f": lambda: 0}, "/f (a value of type function)"),
    ({"ok": 1, "bad": 1j}, "/bad (a value of type complex)"),
    ([numpy.float32(1), numpy.array([1], object)], "/1 (an array of Python objects)"),
    ({3}, "/ (a value of type set)"),
])
def test_unstorable_names_the_first_value_a_checkpoint_cannot_hold(tree, where):
    assert unstorable(tree) == where


def test_state_leaves_are_the_arrays_in_order():
    a, b, c = numpy.zeros(1), numpy.ones(2), numpy.full(3, 2.0)
    assert state_leaves(None) == []
    assert state_leaves(a)[0] is a
    leaves = state_leaves((a, [None, (b,)], c))
    assert len(leaves) == 3 and all(x is y for x, y in zip(leaves, (a, b, c)))


def test_map_state_keeps_the_structure_and_maps_each_array():
    a, b = numpy.zeros(2), numpy.ones(3)
    mapped = map_state((a, [b, None]), lambda x: x + 1)
    assert type(mapped) is tuple and type(mapped[1]) is list and mapped[1][1] is None
    assert mapped[0].tolist() == [1, 1] and mapped[1][0].tolist() == [2, 2, 2]
    assert map_state(None, lambda x: 1 / 0) is None


def test_check_state_returns_the_leaves_of_states_alike():
    live, saved = (numpy.zeros((2, 3)), numpy.zeros(3)), [numpy.ones((2, 3)), numpy.ones(3)]
    leaves, old = check_state("fc1/W", live, saved)
    assert [x is y for x, y in zip(leaves, live)] == [True, True]
    assert [x is y for x, y in zip(old, saved)] == [True, True]


@pytest.mark.parametrize("saved, message", [
    ((numpy.zeros((2, 3)),), "optimizer state for fc1/W has 1 arrays, expected 2"),
    (None, "optimizer state for fc1/W has 0 arrays, expected 2"),
    ((numpy.zeros((3, 2)), numpy.zeros(3)), "optimizer state for fc1/W has shape (3, 2), expected (2, 3)"),
    ((numpy.zeros((2, 3)), numpy.zeros((3, 1))), "optimizer state for fc1/W has shape (3, 1), expected (3,)"),
])
def test_check_state_refuses_another_number_or_shape_of_arrays(saved, message):
    with pytest.raises(ValueError) as refused:
        check_state("fc1/W", (numpy.zeros((2, 3)), numpy.zeros(3)), saved)
    assert str(refused.value) == message
