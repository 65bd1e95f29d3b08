"""A model tried on the data it will train on, once, when the run is built: the first training
batch goes through the model as validation runs it (evaluation mode, no graph recorded, so no
parameter, persistent value or random state changes; the metrics are dropped).

A model that does not fit its data (layers sized for another input, a loss that takes other
arrays) then fails before anything is written, and the failure names what the user can act
on instead of ending in a NumPy traceback at the first iteration: the model's ``_target_``,
the shapes of the batch and of one example, the error as the model raised it and where in the
user's code. Only the errors NumPy raises for arrays that do not fit (ValueError, TypeError,
IndexError) are told this way; any other exception of the model is the user's code's
(:func:`trainer_run.user_code.raised`: its traceback, then one line naming ``model``).
"""

from __future__ import annotations

import traceback
from pathlib import Path

import numpy

from .. import user_code
from ..autograd import no_grad
from ..converter import batch_of
from ..errors import ConfigError
from ..module import evaluating
from ..own_gradients import outputs

MISFITS = (ValueError, TypeError, IndexError)
"""What NumPy raises for arrays of shapes or types an operation cannot take."""
LIBRARIES = (str(Path(numpy.__file__).parent), str(Path(__file__).parents[1]))
"""Folders whose frames are not the user's code (NumPy's, trainer-run's)."""


def check(model, data, backend, batch_size: int, target: str) -> None:
    """Runs ``model`` on the first ``batch_size`` training examples of ``data`` (on
    ``backend``, as the updater converts them); a :data:`MISFITS` error is re-raised as a
    :class:`~trainer_run.errors.ConfigError` naming ``target`` (``model._target_``), the
    shapes and the error (see the module docstring)."""
    batch = batch_of(data.train, numpy.arange(min(batch_size, len(data.train))), backend)
    if not isinstance(batch, tuple):  # examples of another form: the model's own business
        return
    try:
        with no_grad(), evaluating(model), numpy.errstate(all="ignore"):
            outputs(model, batch)
    except ConfigError:
        raise
    except MISFITS as e:
        message = str(e).splitlines()[0] if str(e) else ""
        raise ConfigError(f"model._target_={target} fails on the first batch of the data "
                          f"({_shapes(batch)}): {type(e).__name__}: {message}{_where(e)}; build "
                          f"the model for this data: it receives in_size={data.in_size}, "
                          f"in_shape={data.in_shape} and out_size={data.out_size} when it takes "
                          "those arguments") from None
    except user_code.PASSED:
        raise
    except Exception as e:
        if user_code.is_ours(model):
            raise
        raise user_code.raised("model", model, e) from e


def _shapes(batch: tuple) -> str:
    """``inputs of shape (8, 1, 28, 28), labels of shape (8,)`` for a batch ``(x, t)``."""
    shapes = [str(tuple(numpy.shape(a))) for a in batch]
    if len(shapes) < 2:
        return f"inputs of shape {shapes[0]}"
    return f"inputs of shape {' and '.join(shapes[:-1])}, labels of shape {shapes[-1]}"


def _where(error: BaseException) -> str:
    """`` at my_models.py:11 in forward``: the deepest frame of the user's code in the
    error's traceback (none: ``""``)."""
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not f.filename.startswith(LIBRARIES)]
    if not frames:
        return ""
    frame = frames[-1]
    return f" at {Path(frame.filename).name}:{frame.lineno} in {frame.name}"
