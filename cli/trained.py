"""A trained model back from its run directory (:func:`load_model`, also
``trainer_run.load_model``), for prediction outside the run."""

from __future__ import annotations

from pathlib import Path

import numpy
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from trainer_run import checkpoint, trust, updaters
from trainer_run.autograd import as_data, no_grad
from trainer_run.backend import get_backend
from trainer_run.data import Data, normalization
from trainer_run.data import record as data_record
from trainer_run.data.prepare import with_channel_axis
from trainer_run.errors import ConfigError
from trainer_run.module import evaluating, set_mode

from .build import build_model
from .config_upgrade import upgrade


class Trained:
    """A model rebuilt from a run, in evaluation mode, with what the run knew about its data.

    ``model`` is the model itself (call it with a batch as the run did); ``task``,
    ``classes`` (the names of class ids, or None) and ``normalization`` come from the run's
    ``data.json`` and ``normalization.npz``.
    """

    def __init__(self, model, record: dict):
        self.model = model
        self.task = record["task"]
        self.classes = record.get("classes")
        self.normalization = data_record.normalization(record)

    def __call__(self, *batch):
        """The model on ``batch`` (inputs already normalized, as the run's batches were), in
        evaluation mode without recording a graph: its loss and metrics."""
        with no_grad(), evaluating(self.model):
            return self.model(*batch)

    def predict(self, x) -> numpy.ndarray:
        """The model's outputs (``forward``: logits for a classifier) for the raw inputs ``x``
        (a batch, shaped like the run's examples; ``(N, H, W)`` images gain their channel
        axis), normalized as the run normalized them."""
        forward = getattr(self.model, "forward", None)
        if forward is None:
            raise TypeError(f"{type(self.model).__name__} has no forward(x); predict needs one")
        x = normalization.transform(self.normalization, with_channel_axis(numpy.asarray(x)))
        with no_grad(), evaluating(self.model):
            return numpy.asarray(as_data(forward(x)))


def load_model(run_dir, checkpoint_dir=None, trust: bool = False) -> Trained:
    """The model of the run in ``run_dir``, rebuilt from its saved config (a user's model by
    its ``_target_``, which must be importable), with the parameters of its ``model.npz``
    (or of the checkpoint directory ``checkpoint_dir``), on NumPy, in evaluation mode.
    A model outside trainer-run is built only from a run this user signed, or with ``trust``
    (:mod:`trainer_run.trust`). Raises :class:`~trainer_run.errors.ConfigError` naming what
    is missing or untrusted."""
    run = Path(run_dir)
    config = _config(run, trust)
    if not (run / data_record.FILES[0]).is_file():
        raise ConfigError(f"{run} has no {data_record.FILES[0]}: it is not the directory of a "
                          "finished run of this version")
    record = data_record.read(run)
    dtype = upgrade(config)["backend"]["dtype"]
    backend = get_backend("numpy", seed=0, dtype=dtype)
    data = Data(None, None, tuple(record["in_shape"]), record["out_size"], record["task"])
    model = build_model(config["model"], data, backend)
    if checkpoint_dir is not None:
        updaters.load_main_params(model, Path(checkpoint_dir))
    else:
        checkpoint.load_params(model, run / "model.npz")
    set_mode(model, False)
    return Trained(model, record)


def _config(run: Path, trusted: bool) -> dict:
    """The sections of the run's config that build its model, once :mod:`trainer_run.trust`
    allows it (nothing in them is imported before)."""
    path = run / ".hydra" / "config.yaml"
    if not path.is_file():
        raise ConfigError(f"{run} is not a run directory: it has no .hydra/config.yaml")
    try:
        data = path.read_bytes()
        config = OmegaConf.create(data.decode())
        sections = {key: OmegaConf.to_container(config[key], resolve=True)
                    for key in ("model", "backend", "precision") if key != "precision" or key in config}
    except (OmegaConfBaseException, KeyError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path} cannot be read as a run's config: {e}") from None
    signature = path.with_name(trust.RECORD_SIGNATURE)
    signed = signature.read_text().strip() if signature.is_file() else None
    trust.check(sections, data, signed, f"run {run}", trusted)
    return sections
