"""A text's token ids as a language model's examples: the split, the training windows and the
evaluation blocks.

:func:`split` takes the validation split from the end of the tokens (nanoGPT's rule).
:class:`Windows` is the training set: an example is ``block_size`` tokens from an offset, its
targets the same tokens one further on; :class:`WindowIterator` draws an epoch's offsets at
random, with replacement, from the iterator's seeded generator. :class:`Blocks` is the
evaluation set: the split in consecutive, non-overlapping blocks, the same every time. Both
datasets read rows with one fancy index (``take``), so the updater's prefetch and workers serve
them like any array dataset, and the tokens may be memory-mapped (:func:`.token_files.read`):
only the rows asked for are read.

Ids come back as int64 whatever the tokens' dtype (uint16 on disk): a signed type, as the
loss's ``ignore_index=-1`` comparison needs (an unsigned -1 would wrap), and the type an
embedding's row index and PyTorch's ``long`` have, so no conversion follows; a batch of
``12 x 64`` ids is 6 KB.
"""

from __future__ import annotations

import numbers

import numpy

from ..errors import ConfigError
from .iterators import SerialIterator

IDS = numpy.int64
"""The dtype of the ids :class:`Windows` and :class:`Blocks` return."""


def split(tokens, val_fraction=0.1, block_size: int | None = None):
    """``(train, val)``: views of the 1-D ``tokens``, the last ``len - int(len * (1 -
    val_fraction))`` of them the validation split (an empty one for ``val_fraction=0``).
    ``val_fraction`` must lie in [0, 1). With ``block_size``, a split that cannot hold one
    window (``block_size + 1`` tokens) is refused; an empty validation split is not (no
    validation)."""
    if (isinstance(val_fraction, bool) or not isinstance(val_fraction, numbers.Real)
            or not 0 <= val_fraction < 1):
        raise ConfigError(f"dataset.val_fraction={val_fraction!r} is outside [0, 1); give the "
                          "fraction of the text held out for validation, e.g. 0.1 (0 for none)")
    n = int(len(tokens) * (1 - val_fraction))
    train, val = tokens[:n], tokens[n:]
    if block_size is not None:
        _block_size(block_size, len(tokens))
        for name, part, fix in (("training", train, "smaller"), ("validation", val, "larger")):
            if name == "validation" and len(part) == 0:
                continue
            if len(part) < block_size + 1:
                raise ConfigError(
                    f"the {name} split has {len(part)} tokens (dataset.val_fraction="
                    f"{val_fraction} of {len(tokens)}), fewer than dataset.block_size + 1 = "
                    f"{block_size + 1}; give a longer text, a {fix} dataset.val_fraction or a "
                    "smaller dataset.block_size")
    return train, val


class Windows:
    """The training examples of ``tokens`` (1-D, in memory or memory-mapped): the example at
    offset ``o`` is ``(tokens[o : o + block_size], tokens[o + 1 : o + 1 + block_size])``, for
    ``o`` in ``[0, len(tokens) - block_size - 1]`` (nanoGPT's ``randint(len - block_size)``).
    ``len()`` is ``len(tokens) // block_size``, the windows of one epoch; ``take`` and ``[ ]``
    are indexed by offset, not by position (:class:`WindowIterator` draws the offsets)."""

    def __init__(self, tokens, block_size: int):
        self.tokens = tokens
        self.block_size = _block_size(block_size, len(tokens))
        self.starts = len(tokens) - self.block_size - 1
        """The last offset a window may start at (its last target is the last token)."""
        self._span = numpy.arange(self.block_size)

    def __len__(self):
        return len(self.tokens) // self.block_size

    def __getitem__(self, offset):
        offset = int(offset)
        if not 0 <= offset <= self.starts:
            raise IndexError(f"offset {offset} is outside [0, {self.starts}]")
        x, y = self.take(numpy.array([offset]))
        return x[0], y[0]

    def take(self, offsets):
        """``(x, y)``, int64 arrays of shape ``(len(offsets), block_size)``: the windows at
        ``offsets`` and their targets."""
        rows = numpy.asarray(offsets, dtype=numpy.int64)[:, None] + self._span
        return (numpy.asarray(self.tokens[rows], dtype=IDS),
                numpy.asarray(self.tokens[rows + 1], dtype=IDS))


class Blocks(Windows):
    """The evaluation examples of ``tokens``: block ``i`` is the window at offset
    ``i * block_size``, for every block whose targets exist (``(len(tokens) - 1) //
    block_size`` of them), so each token is predicted once. The tokens after the last full
    block are not predicted. ``take`` and ``[ ]`` are indexed by block number."""

    def __len__(self):
        return (len(self.tokens) - 1) // self.block_size

    def __getitem__(self, index):
        index = int(index)
        if not 0 <= index < len(self):
            raise IndexError(f"block {index} is outside [0, {len(self) - 1}]")
        x, y = self.take(numpy.array([index]))
        return x[0], y[0]

    def take(self, indices):
        """``(x, y)`` of the blocks ``indices``, int64 arrays of shape ``(len(indices),
        block_size)``."""
        return super().take(numpy.asarray(indices, dtype=numpy.int64) * self.block_size)


class WindowIterator(SerialIterator):
    """A :class:`.SerialIterator` over :class:`Windows` that draws each batch's offsets when it
    is asked for: ``batch_size`` offsets uniform in ``[0, dataset.starts]``, with replacement,
    by ``rng.integers(0, starts + 1, size=batch_size)`` (nanoGPT's ``torch.randint`` per
    batch), and no epoch's order is kept, in memory or in a checkpoint (a corpus of a billion
    tokens has 15 million windows of 64). An epoch is ``len(dataset)`` windows: the batch that
    reaches it is ``is_new_epoch``, and ``epoch_detail`` counts windows drawn. Its state is the
    position, the epoch counters and the generator's state, so a restored iterator draws the
    same windows."""

    def __init__(self, dataset: Windows, batch_size: int, repeat: bool = True,
                 rng: numpy.random.Generator | None = None):
        super().__init__(dataset, batch_size, repeat=repeat, shuffle=False, rng=rng)

    def next_indices(self) -> numpy.ndarray:
        if not self._repeat and self.epoch > 0:
            raise StopIteration
        self._previous_epoch_detail = self.epoch_detail
        n = len(self.dataset)
        end = self.current_position + self.batch_size
        size = self.batch_size if self._repeat else min(self.batch_size, n - self.current_position)
        self.is_new_epoch = end >= n
        self.epoch += end // n
        self.current_position = end % n if self._repeat else (0 if end >= n else end)
        return self._rng.integers(0, self.dataset.starts + 1, size=size, dtype=numpy.int64)


def _block_size(block_size, n: int) -> int:
    if isinstance(block_size, bool) or not isinstance(block_size, numbers.Integral) \
            or block_size < 1:
        raise ConfigError(f"dataset.block_size={block_size!r} must be a positive integer, e.g. 64")
    if n < block_size + 1:
        raise ConfigError(f"the text has {n} tokens, fewer than dataset.block_size + 1 = "
                          f"{block_size + 1}; give a longer text or a smaller dataset.block_size")
    return int(block_size)
