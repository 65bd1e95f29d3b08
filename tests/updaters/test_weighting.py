"""Weighting the batches of one update (updaters/weighting.py): each batch counts by its share of the
update's examples."""

import numpy as np

from tests.updaters.test_updaters import DATA, assert_params_close, make


class Fixed:
    """An iterator that hands out the given index arrays, in order."""

    def __init__(self, dataset, batches):
        self.dataset, self.batches = dataset, list(batches)

    def next_indices(self):
        return self.batches.pop(0)

    def finalize(self):
        pass


def gradients(updater) -> dict:
    updater.compute_gradients(0)
    return {k: p.grad.copy() for k, p in updater.get_model().params().items()}


def test_accumulation_weights_batches_by_their_examples():
    """Batches of 30 and 70 examples make the gradient of the union batch of 100, i.e.
    0.3 g30 + 0.7 g70: not the mean of the two batch means, nor nnabla's sum of them."""
    order = np.random.default_rng(1).permutation(len(DATA.train))[:100]

    def grads(batches, accum):
        updater = make(accum_grad=accum)
        updater._iterators["main"] = Fixed(DATA.train, batches)
        return gradients(updater)

    whole, parts = grads([order], 1), grads([order[:30], order[30:]], 2)
    g30, g70 = grads([order[:30]], 1), grads([order[30:]], 1)
    assert_params_close(whole, parts, rtol=1e-5, atol=1e-7)
    assert_params_close(parts, {k: 0.3 * g30[k] + 0.7 * g70[k] for k in g30}, rtol=1e-5, atol=1e-7)
    assert not np.allclose(parts["l1/W"], 0.5 * (g30["l1/W"] + g70["l1/W"]), rtol=1e-2)
