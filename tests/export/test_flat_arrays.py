"""The flat arrays of an export: every parameter and persistent value by its path, bit for bit,
with the run's input normalization, read back without pickle."""

from __future__ import annotations

import numpy
import pytest
from export_models import backend, built, randomized, trained

from trainer_run.errors import ConfigError
from trainer_run.export import flat_arrays
from trainer_run.layers import Linear
from trainer_run.models import Model


@pytest.mark.parametrize("normalize", ["unit", "standardize", "none"])
def test_the_arrays_are_the_models_with_the_normalization(normalize):
    model = randomized(built("resnet", backend()))
    loaded = trained(model, normalize)
    named = flat_arrays.arrays(loaded)
    own = {**model.params(), **model.persistents()}
    assert set(named) - set(own) == {"normalization/kind", *{
        "unit": ["normalization/scale"], "standardize": ["normalization/mean", "normalization/std"],
        "none": []}[normalize]}
    assert all(numpy.array_equal(named[k], v.data) for k, v in own.items())
    assert str(named["normalization/kind"]) == normalize
    if normalize == "unit":
        assert named["normalization/scale"] == numpy.float32(255)
    if normalize == "standardize":
        assert numpy.array_equal(named["normalization/std"], loaded.normalization["std"])


class Shadowing(Model):
    def __init__(self, backend):
        self.normalization = Model()
        self.normalization.kind = Linear(2, 2, backend)


def test_a_model_array_where_the_normalization_goes_is_refused():
    with pytest.raises(ConfigError, match=r"^the model has an array named normalization/kind/W, "
                                          r"where the export keeps the input normalization"):
        flat_arrays.arrays(trained(Shadowing(backend()), "none", in_shape=(2,)))
