"""A text's tokens as a language model's data (data/text_windows.py): the split from the end,
the training windows at random offsets drawn by the seeded iterator, the evaluation blocks,
each against slicing by hand."""

from __future__ import annotations

import numpy
import pytest

from trainer_run.data import token_files
from trainer_run.data.text_windows import Blocks, WindowIterator, Windows, split
from trainer_run.data.tokenizers import CharTokenizer
from trainer_run.errors import ConfigError

TOKENS = (numpy.arange(103) * 7 % 65).astype(numpy.uint16)   # every token distinct by position


def by_hand(tokens, offsets, block):
    x = numpy.array([[int(tokens[o + j]) for j in range(block)] for o in offsets])
    y = numpy.array([[int(tokens[o + 1 + j]) for j in range(block)] for o in offsets])
    return x, y


def test_windows_take_is_slicing_by_hand_as_int64():
    windows = Windows(TOKENS, 8)
    offsets = numpy.array([0, 5, 94, 94, 17])          # 94 = 103 - 8 - 1: the last offset
    x, y = windows.take(offsets)
    hx, hy = by_hand(TOKENS, offsets, 8)
    assert x.dtype == numpy.int64 and y.dtype == numpy.int64
    assert x.shape == y.shape == (5, 8)
    assert (x == hx).all() and (y == hy).all()
    assert (windows.take([94])[1][0] == TOKENS[95:103]).all()   # its last target: the last token
    assert len(windows) == 103 // 8 == 12
    assert windows.starts == 94
    ex, ey = windows[17]
    assert (ex == TOKENS[17:25]).all() and (ey == TOKENS[18:26]).all()
    with pytest.raises(IndexError):
        windows[95]


def test_blocks_are_every_full_block_and_each_target_once():
    blocks = Blocks(TOKENS, 10)
    n = (103 - 1) // 10                                # 10 blocks: the 11th has no target for its end
    assert len(blocks) == n == 10
    x, y = blocks.take(numpy.arange(n))
    hx, hy = by_hand(TOKENS, [0, 10, 20, 30, 40, 50, 60, 70, 80, 90], 10)
    assert (x == hx).all() and (y == hy).all()
    assert (x.ravel() == TOKENS[:100]).all()           # the inputs cover the first 100 tokens
    assert (y.ravel() == TOKENS[1:101]).all()          # each of tokens 1..100 predicted once
    bx, by = blocks[3]
    assert (bx == TOKENS[30:40]).all() and (by == TOKENS[31:41]).all()
    with pytest.raises(IndexError):
        blocks[10]
    exact = Blocks(numpy.arange(40), 10)               # 40 tokens: the 4th block's last target is missing
    assert len(exact) == 3
    assert (exact.take([2])[1][0] == numpy.arange(21, 31)).all()


def test_split_takes_validation_from_the_end():
    train, val = split(TOKENS, 0.1)
    n = int(103 * 0.9)                                 # 92
    assert len(train) == 92 == n and len(val) == 11
    assert (train == TOKENS[:92]).all() and (val == TOKENS[92:]).all()
    assert numpy.shares_memory(train, TOKENS) and numpy.shares_memory(val, TOKENS)
    train, val = split(TOKENS, 0)
    assert len(train) == 103 and len(val) == 0
    train, val = split(TOKENS, 0.5, block_size=10)
    assert (len(train), len(val)) == (51, 52)


@pytest.mark.parametrize("fraction", [1, 1.0, -0.1, 2, True, "0.1"])
def test_split_refuses_a_fraction_outside_0_1(fraction):
    with pytest.raises(ConfigError) as refused:
        split(TOKENS, fraction)
    assert str(refused.value) == (f"dataset.val_fraction={fraction!r} is outside [0, 1); give the "
                                  "fraction of the text held out for validation, e.g. 0.1 (0 for "
                                  "none)")


def test_split_refuses_a_split_shorter_than_a_window():
    with pytest.raises(ConfigError) as refused:
        split(TOKENS, 0.1, block_size=11)              # val: 11 tokens, a window needs 12
    assert str(refused.value) == ("the validation split has 11 tokens (dataset.val_fraction=0.1 "
                                  "of 103), fewer than dataset.block_size + 1 = 12; give a longer "
                                  "text, a larger dataset.val_fraction or a smaller "
                                  "dataset.block_size")
    with pytest.raises(ConfigError) as refused:
        split(TOKENS, 0.9, block_size=10)              # train: int(103 * 0.1) = 10 tokens
    assert str(refused.value) == ("the training split has 10 tokens (dataset.val_fraction=0.9 "
                                  "of 103), fewer than dataset.block_size + 1 = 11; give a longer "
                                  "text, a smaller dataset.val_fraction or a smaller "
                                  "dataset.block_size")
    assert len(split(TOKENS, 0, block_size=50)[1]) == 0   # no validation split is not refused


@pytest.mark.parametrize("kind", [Windows, Blocks])
def test_a_text_shorter_than_a_window_is_refused(kind):
    with pytest.raises(ConfigError) as refused:
        kind(TOKENS[:64], 64)
    assert str(refused.value) == ("the text has 64 tokens, fewer than dataset.block_size + 1 = "
                                  "65; give a longer text or a smaller dataset.block_size")
    assert len(kind(TOKENS[:65], 64)) == 1


def batches(iterator, count):
    return [iterator.next_indices() for _ in range(count)]


def test_iterator_draws_an_epoch_of_offsets_in_range_with_its_generator():
    windows = Windows(TOKENS, 8)                       # 12 windows an epoch, offsets 0..94
    it = WindowIterator(windows, 5, rng=numpy.random.default_rng(3))
    drawn = numpy.random.default_rng(3)
    each = [drawn.integers(0, 95, size=5) for _ in range(7)]
    got = numpy.concatenate(batches(it, 36 // 5))      # 7 batches: 35 offsets
    assert (got == numpy.concatenate(each)).all()
    assert got.min() >= 0 and got.max() <= 94
    assert it.epoch == 2 and it.current_position == 11
    many = WindowIterator(windows, 1000, rng=numpy.random.default_rng(0))
    spread = numpy.concatenate(batches(many, 200))
    assert spread.min() == 0 and spread.max() == 94   # both ends are drawn
    x, y = windows.take(got[:5])
    hx, hy = by_hand(TOKENS, got[:5], 8)
    assert (x == hx).all() and (y == hy).all()


def test_iterators_of_one_seed_give_the_same_windows():
    windows = Windows(TOKENS, 8)
    a = WindowIterator(windows, 4, rng=numpy.random.default_rng(7))
    b = WindowIterator(windows, 4, rng=numpy.random.default_rng(7))
    c = WindowIterator(windows, 4, rng=numpy.random.default_rng(8))
    first = batches(a, 9)
    assert all((p == q).all() for p, q in zip(first, batches(b, 9)))
    assert not all((p == q).all() for p, q in zip(first, batches(c, 9)))


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_state_saved_mid_epoch_continues_with_the_same_batches(k):
    windows = Windows(TOKENS, 8)                       # 12 windows, batches of 5 cross epochs
    original = WindowIterator(windows, 5, rng=numpy.random.default_rng(5))
    batches(original, k)
    state = original.state_dict()
    restored = WindowIterator(windows, 5, rng=numpy.random.default_rng(999))
    restored.load_state_dict(state)
    ahead, again = batches(original, 8), batches(restored, 8)   # 40 offsets: over 3 epochs
    for p, q in zip(ahead, again):
        assert (p == q).all()
        assert all((u == v).all() for u, v in zip(windows.take(p), windows.take(q)))
    assert original.epoch == restored.epoch and original.epoch >= 3


def test_a_memory_mapped_token_file_works_as_tokens(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("hello, windows of text\n" * 5, encoding="utf-8")
    tokenizer = CharTokenizer.of_text(token_files.chunks([text]))
    count = token_files.write([text], tokenizer, tmp_path / "t.bin")
    tokens = token_files.read(tmp_path / "t.bin", tokenizer.dtype)
    assert isinstance(tokens, numpy.memmap) and count == len(tokens) == 115
    expected = tokenizer.encode(text.read_text(encoding="utf-8"))
    train, val = split(tokens, 0.2, block_size=8)
    x, y = Windows(train, 8).take([0, 83])
    hx, hy = by_hand(expected, [0, 83], 8)
    assert type(x) is numpy.ndarray and x.dtype == numpy.int64
    assert (x == hx).all() and (y == hy).all()
    bx, by = Blocks(val, 8).take([0, 1])
    hx, hy = by_hand(expected, [92, 100], 8)
    assert (bx == hx).all() and (by == hy).all()
