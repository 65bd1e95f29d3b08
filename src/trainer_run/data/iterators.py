"""Dataset iterators with Chainer's ``SerialIterator`` semantics.

``next()`` returns a list of ``batch_size`` examples. With ``repeat`` the iterator cycles
forever: a batch that crosses an epoch boundary is completed from the start of the next
(reshuffled) order, and ``is_new_epoch`` is true for that batch. Without ``repeat`` the
last batch may be short and the following ``next()`` raises ``StopIteration``.
``epoch_detail`` is ``epoch + position / len(dataset)``.

The order and position, the epoch counters and the shuffling generator's state are plain
data (:meth:`SerialIterator.state_dict`), so a restored iterator yields exactly the
batches the original would have.
"""

from __future__ import annotations

import numpy

from ..errors import check_number


class SerialIterator:
    """Iterates over a dataset in (optionally shuffled) order, ``batch_size`` at a time.

    Args:
        dataset: any object with ``len`` and ``__getitem__``.
        batch_size: examples per batch.
        repeat: cycle over the dataset forever.
        shuffle: visit examples in a new random order each epoch.
        rng: the generator used for shuffling (a ``numpy.random.Generator``).
    """

    def __init__(self, dataset, batch_size: int, repeat: bool = True, shuffle: bool = True,
                 rng: numpy.random.Generator | None = None):
        self.dataset = dataset
        self.batch_size = check_number("batch_size", batch_size, low=1, integer=True)
        self._repeat = repeat
        self._shuffle = shuffle
        self._rng = rng if rng is not None else numpy.random.default_rng()
        self.reset()

    def reset(self) -> None:
        self.current_position = 0
        self.epoch = 0
        self.is_new_epoch = False
        self._previous_epoch_detail = -1.0
        self._order = self._rng.permutation(len(self.dataset)) if self._shuffle else None

    def __iter__(self):
        return self

    def __next__(self) -> list:
        indices = self.next_indices()
        return [self.dataset[int(i)] for i in indices]

    next = __next__

    def next_indices(self) -> numpy.ndarray:
        """Advances by one batch and returns the dataset indices of its examples."""
        if not self._repeat and self.epoch > 0:
            raise StopIteration
        self._previous_epoch_detail = self.epoch_detail
        n = len(self.dataset)
        i, i_end = self.current_position, self.current_position + self.batch_size
        order = self._order if self._order is not None else numpy.arange(n)
        batch = order[i:i_end]
        if i_end >= n:
            if self._repeat:
                rest = i_end - n
                if self._order is not None:
                    self._order = self._rng.permutation(n)
                    order = self._order
                if rest > 0:
                    batch = numpy.concatenate([batch, order[:rest]])
                self.current_position = rest
            else:
                self.current_position = 0
            self.epoch += 1
            self.is_new_epoch = True
        else:
            self.is_new_epoch = False
            self.current_position = i_end
        return batch

    @property
    def epoch_detail(self) -> float:
        return self.epoch + self.current_position / len(self.dataset)

    @property
    def previous_epoch_detail(self) -> float | None:
        return None if self._previous_epoch_detail < 0 else self._previous_epoch_detail

    @property
    def repeat(self) -> bool:
        return self._repeat

    def finalize(self) -> None:
        """Releases resources (nothing to release for a serial iterator)."""

    def state_dict(self) -> dict:
        return {
            "current_position": self.current_position,
            "epoch": self.epoch,
            "is_new_epoch": self.is_new_epoch,
            "previous_epoch_detail": self._previous_epoch_detail,
            "order": None if self._order is None else self._order.copy(),
            "rng": self._rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict) -> None:
        self.current_position = int(state["current_position"])
        self.epoch = int(state["epoch"])
        self.is_new_epoch = bool(state["is_new_epoch"])
        self._previous_epoch_detail = float(state["previous_epoch_detail"])
        order = state["order"]
        self._order = None if order is None else numpy.asarray(order).copy()
        self._rng.bit_generator.state = state["rng"]
