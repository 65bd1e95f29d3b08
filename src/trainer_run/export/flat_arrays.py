"""A trained model as flat arrays by name in one ``.npz`` file (:func:`arrays`): what
``model.npz`` holds, the parameters and persistent values by their path in the model (``l1/W``,
``bn1/avg_mean``), with the run's input normalization beside them, so the file alone turns raw
inputs into the model's inputs:

- ``normalization/kind``: ``none``, ``unit`` or ``standardize`` (a string array);
- ``normalization/scale`` for ``unit`` (inputs are divided by it), ``normalization/mean`` and
  ``normalization/std`` for ``standardize`` (``(x - mean) / std``).

The arrays are the model's own, in its dtype, unchanged; the file is read by
``numpy.load(path, allow_pickle=False)`` (nothing in it needs pickle).
"""

from __future__ import annotations

import numpy

from trainer_run.errors import ConfigError
from trainer_run.module import persistents_of

PREFIX = "normalization/"
"""The names of the normalization's arrays start so."""


def arrays(trained) -> dict[str, numpy.ndarray]:
    """The arrays of ``trained`` (:class:`trainer_run.runner.trained.Trained`) by name, as the module
    docstring says; ConfigError for a model of its own whose path starts with
    :data:`PREFIX`."""
    model = trained.model
    named = {path: numpy.asarray(holder.data)
             for path, holder in {**model.params(), **persistents_of(model)}.items()}
    taken = [path for path in named if path.startswith(PREFIX)]
    if taken:
        raise ConfigError(f"the model has an array named {taken[0]}, where the export keeps the "
                          "input normalization; rename that attribute of the model")
    values = trained.normalization
    named[PREFIX + "kind"] = numpy.array(values.get("kind", "none"))
    for key in ("scale", "mean", "std"):
        if key in values:
            named[PREFIX + key] = numpy.asarray(values[key])
    return named
