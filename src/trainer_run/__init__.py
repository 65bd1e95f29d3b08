"""trainer-run: a config-driven training runner for models on NumPy or CuPy arrays.

The library is usable from Python without Hydra; the ``trainer-run`` command builds the
same objects from a config. See the README for the map from Chainer, MXNet and nnabla
names to ours.
"""

__version__ = "0.1.0"


def train(overrides=(), run_dir=None, config_dir=None):
    """Trains a new run as ``trainer-run <overrides>`` does and returns it as a
    :class:`~trainer_run.runner.python_api.Run` (see :func:`trainer_run.runner.python_api.train`)."""
    from trainer_run.runner.python_api import train as run

    return run(overrides, run_dir, config_dir)


def resume(run_dir, overrides=(), config_dir=None):
    """Continues the run in ``run_dir`` bit for bit, as ``trainer-run resume=<run_dir>`` does
    (see :func:`trainer_run.runner.python_api.resume`)."""
    from trainer_run.runner.python_api import resume as run

    return run(run_dir, overrides, config_dir)


def load_model(run_dir, checkpoint_dir=None, trust: bool = False):
    """The trained model of the run in ``run_dir`` (see :func:`trainer_run.runner.trained.load_model`):
    rebuilt from its saved config, its parameters loaded, in evaluation mode, with
    ``predict(x)`` applying the run's normalization. A model outside trainer-run loads only
    from a run you wrote (signed with your key) or with ``trust=True``."""
    from trainer_run.runner.trained import load_model as load

    return load(run_dir, checkpoint_dir, trust)


def load_weights(model, source, checkpoint=None):
    """Loads into ``model``, in place, the saved weights ``source`` names: a run directory (its
    best weights, or ``checkpoint="last"``), a checkpoint directory or an ``.npz`` file (see
    :func:`trainer_run.runs.weights.load`); a run that did not complete loads with a warning.
    Returns what was loaded (a :class:`~trainer_run.runs.weights.Weights`)."""
    import warnings

    from trainer_run.runs.weights import load

    weights = load(model, source, checkpoint)
    if weights.warning is not None:
        warnings.warn(weights.warning, stacklevel=2)
    return weights


def check_gradients(model, batch, **options):
    """Compares ``model``'s gradients on ``batch`` with finite differences (see
    :func:`trainer_run.gradient_check.check_gradients`)."""
    from trainer_run.gradient_check import check_gradients as check

    return check(model, batch, **options)
