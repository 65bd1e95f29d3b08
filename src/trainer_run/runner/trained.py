"""A trained model back from its run directory (:func:`load_model`, also
``trainer_run.load_model``), for prediction outside the run, without Hydra or the command.

The run's ``.hydra/config.yaml`` is read as data (:mod:`trainer_run.storage.yaml_files`); its
``model`` and ``backend`` sections (upgraded from an older form by
:mod:`trainer_run.config_upgrade`) are checked by :mod:`trainer_run.runs.trust` before anything they
name is imported, then the model is built as the run built it
(:func:`trainer_run.models.build_model`). Its interpolations are resolved first
(:mod:`trainer_run.stored_config`: in a run this user did not sign, references between its keys
only; a resolver such as ``${oc.env:X}`` is refused in one line unless ``trust``), then checked.
"""

from __future__ import annotations

import inspect
import warnings
from pathlib import Path

import numpy

from trainer_run import prediction, stored_config
from trainer_run.autograd import no_grad
from trainer_run.backend import get_backend
from trainer_run.config_upgrade import upgrade
from trainer_run.data import Data, raw_inputs, text
from trainer_run.data import description as data_description
from trainer_run.errors import ConfigError, check, check_number
from trainer_run.models import build_model, generation
from trainer_run.module import evaluating, set_mode
from trainer_run.runs import trust
from trainer_run.runs.weights import Weights, load
from trainer_run.storage import run_files

SECTIONS = ("model", "backend", "precision")
"""The sections of a run's config that build its model (``precision``: an older run's dtype)."""
RECORD_CONFIG = Path(run_files.RECORD) / run_files.CONFIG
DEFAULT_BATCH_SIZE = 50
"""``dataset.batch_size``'s default (``configs/_dataset.yaml``), for a config that has none."""


class Trained:
    """A model rebuilt from a run, in evaluation mode, with what the run knew about its data.

    ``model`` is the model itself (call it with a batch as the run did); ``task``,
    ``classes`` (the names of class ids, or None), ``in_shape`` (one example's shape) and
    ``normalization`` and ``raw_inputs`` (the dtype and range of the inputs it trained on,
    :mod:`trainer_run.data.raw_inputs`) come from the run's ``data.json`` and
    ``normalization.npz``; ``weights``
    says which saved parameters it holds (:class:`~trainer_run.runs.weights.Weights`: best or last,
    their iteration and file); ``batch_size`` (the run's ``dataset.batch_size``) and ``dtype``
    (its float dtype) are how :meth:`predict` feeds the model. A language model's run
    (``dataset=text``) has its ``tokenizer`` (:meth:`encode`, :meth:`decode`,
    :meth:`generate`); other runs have None.
    """

    def __init__(self, model, record: dict, weights: Weights | None = None,
                 batch_size: int = DEFAULT_BATCH_SIZE, dtype="float32", tokenizer=None):
        self.model = model
        self.tokenizer = tokenizer
        self.weights = weights
        self.task = record["task"]
        self.classes = record.get("classes")
        self.in_shape = tuple(record["in_shape"])
        self.normalization = data_description.normalization(record)
        self.raw_inputs = raw_inputs.recorded(record)
        self.batch_size = batch_size
        self.dtype = numpy.dtype(dtype)

    def __call__(self, *batch):
        """The model on ``batch`` (inputs already normalized, as the run's batches were), in
        evaluation mode without recording a graph: its loss and metrics."""
        with no_grad(), evaluating(self.model):
            return self.model(*batch)

    def predict(self, x, batch_size: int | None = None) -> numpy.ndarray:
        """The model's outputs (``forward``: logits for a classifier) for the raw inputs ``x``,
        normalized as the run normalized them, ``batch_size`` examples at a time (default:
        the run's batch size), in evaluation mode, recording no graph. ``x`` is a batch
        shaped like the run's examples, ``(N, *in_shape)``, or one example, ``in_shape``,
        whose outputs come back without the batch axis; single-channel images may leave out
        their channel axis. Inputs that cannot be raw inputs of this run (scaled already) give
        a :class:`UserWarning`; inputs that are not numbers, a TypeError. See
        :mod:`trainer_run.prediction`. A language model's ``x`` is token ids ``(N, T)`` or
        ``(T,)`` of any length ``T`` the model takes (a GPT's: up to its ``block_size``); other
        numbers are a TypeError."""
        in_shape = self.in_shape
        if self.tokenizer is not None:
            if numpy.asarray(x).dtype.kind not in "iu":
                raise TypeError(f"a language model's predict takes token ids (integers, e.g. "
                                f"encode(text)), and x holds {numpy.asarray(x).dtype}")
            in_shape = numpy.shape(x)[-1:] if numpy.ndim(x) in (1, 2) else in_shape
        return prediction.predict(self.model, x, in_shape, self.normalization, self.dtype,
                                  self.batch_size if batch_size is None else batch_size,
                                  self.raw_inputs)

    def encode(self, text: str) -> numpy.ndarray:
        """The token ids of ``text`` under the run's tokenizer (a character outside a ``char``
        vocabulary is refused in one line naming it)."""
        return self._tokenizer().encode(text)

    def decode(self, ids) -> str:
        """The text of the token ids ``ids``."""
        return self._tokenizer().decode(numpy.asarray(ids))

    def generate(self, prompt: str = "\n", max_new_tokens: int = 200, temperature: float = 1.0,
                 top_k: int | None = None, seed: int | None = None, samples: int | None = None):
        """The text of ``prompt`` followed by ``max_new_tokens`` tokens sampled from the model
        (:func:`trainer_run.models.generation.generate`: ``temperature``, ``top_k``), drawn
        from ``numpy.random.default_rng(seed)``: the same seed gives the same text. With
        ``samples`` a list of that many texts, drawn together; else one text."""
        if samples is not None:
            check_number("samples", samples, low=1, integer=True)
        check(callable(getattr(self.model, "next_logits", None)),
              f"{type(self.model).__name__} does not generate text: a language model has "
              "next_logits(ids, state) (trainer_run.models.generation)")
        check(isinstance(prompt, str) and prompt != "",
              f"the prompt must be text of at least one character, got {prompt!r}")
        try:
            encoded = self.encode(prompt)
        except ConfigError as e:
            raise ConfigError(f"the prompt: {e}") from None
        ids = numpy.tile(encoded.astype(numpy.int64), (samples or 1, 1))
        out = generation.generate(self.model, ids, max_new_tokens, temperature, top_k,
                                  numpy.random.default_rng(seed))
        texts = [self.decode(row) for row in out]
        return texts if samples is not None else texts[0]

    def _tokenizer(self):
        check(self.tokenizer is not None, "this run has no tokenizer: encode, decode and generate "
              "are for runs of dataset=text")
        return self.tokenizer


def load_model(run_dir, checkpoint=None, trust: bool = False) -> Trained:
    """The model of the run in ``run_dir``, rebuilt from its saved config (a user's model by
    its ``_target_``, which must be importable), on NumPy, in evaluation mode, with the
    parameters ``checkpoint`` names (:func:`trainer_run.runs.weights.resolve`): ``"best"`` (the
    best evaluation's by the run's objective), ``"last"`` (those the run ended with,
    ``model.npz``), a checkpoint directory (``checkpoints/iter_<N>``, ``checkpoints/best``)
    or an ``.npz`` file; by default best when the run has one, else last. A run that did not
    complete loads with a warning (:class:`UserWarning`) naming how it ended.
    A model of the user's own imports from the current folder, as ``trainer-run`` and
    ``trainer-eval`` import it (:func:`trainer_run.targets.locate`: only the module its
    ``_target_`` names, only when it is not importable otherwise). A model outside
    trainer-run is built only from a run this user signed, or with ``trust``
    (:mod:`trainer_run.runs.trust`; a bool). Raises
    :class:`~trainer_run.errors.ConfigError` naming what is missing, untrusted or of another
    shape."""
    run = Path(run_dir)
    saved = resolved_record(run, trust)
    config = _checked(run, saved, SECTIONS)
    if not _present(run / data_description.FILES[0]):
        raise ConfigError(f"{run} has no {data_description.FILES[0]}: it is not the directory of a "
                          "finished run of this version")
    record = data_description.read(run)
    dtype = upgrade(config).get("backend", {}).get("dtype", "float32")
    backend = get_backend("numpy", seed=0, dtype=dtype)
    data = Data(None, None, tuple(record["in_shape"]), record["out_size"], record["task"])
    model = build_model(config["model"], data, backend)
    weights = load(model, run, checkpoint, f"the model of run {run}")
    if weights.warning is not None:
        warnings.warn(weights.warning, stacklevel=_callers_level())
    set_mode(model, False)
    return Trained(model, record, weights, _batch_size(saved[0]), backend.dtype,
                   text.saved_tokenizer(run))


def _callers_level() -> int:
    """The ``stacklevel`` of the first frame outside trainer-run's package from the function
    that calls this one, so that a warning points at the user's line that loaded the model
    (through ``trainer_run.load_model`` or ``Run.load_model`` alike)."""
    package = Path(__file__).parent.parent  # trainer_run
    frame, level = inspect.currentframe().f_back, 1  # the function that warns
    while frame.f_back is not None and Path(frame.f_code.co_filename).is_relative_to(package):
        frame, level = frame.f_back, level + 1
    return level


def _batch_size(config: dict) -> int:
    """The ``dataset.batch_size`` of a run's resolved ``config`` (a number, which names no
    code), or :data:`DEFAULT_BATCH_SIZE` when it has none that is a positive integer."""
    section = config.get("dataset")
    size = section.get("batch_size") if isinstance(section, dict) else None
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        return DEFAULT_BATCH_SIZE
    return size


def read_sections(run: Path, keys=SECTIONS, trusted: bool = False) -> dict:
    """The sections ``keys`` of the run's saved config (``.hydra/config.yaml``; ``model``
    must be there, the others may not), resolved (:func:`resolved_record`), once
    :mod:`trainer_run.runs.trust` allows what they name (nothing in them is imported before):
    a run this user signed, or ``trusted``."""
    return _checked(run, resolved_record(run, trusted), keys)


def _checked(run: Path, saved: tuple, keys) -> dict:
    """The sections ``keys`` of ``saved`` (:func:`resolved_record` of ``run``), as
    :func:`read_sections` gives them."""
    config, vouched = saved
    if not isinstance(config.get("model"), dict):
        raise ConfigError(f"{Path(run) / RECORD_CONFIG} cannot be read as a run's config: it "
                          "has no model section")
    sections = {key: config[key] for key in keys if key in config}
    if not vouched:
        trust.refuse_code(sections, f"run {run}")
    return sections


def resolved_record(run: Path, trusted: bool = False) -> tuple[dict, bool]:
    """The run's saved config with its interpolations resolved
    (:func:`trainer_run.stored_config.resolve`: references between its keys only, unless this
    user signed it or ``trusted``, a bool: :func:`trainer_run.runs.trust.flag`), and whether the
    user vouches for it so (then it may name code outside trainer-run)."""
    path = Path(run) / RECORD_CONFIG
    if not _present(path):
        raise ConfigError(f"{run} is not a run directory: it has no {RECORD_CONFIG}")
    config, data, signed = trust.read_record(path)
    vouched = trust.flag(trusted) or trust.signed_by_me(data, signed)
    return stored_config.resolve(config, f"run {run}", resolvers=vouched), vouched


def signed_by_me(run) -> bool:
    """Whether this user signed the run's saved config (``.hydra/config.yaml``): only then are
    the places it names (:mod:`trainer_run.compose.places`) the user's."""
    _, data, signed = trust.read_record(Path(run) / RECORD_CONFIG)
    return trust.signed_by_me(data, signed)


def _present(path: Path) -> bool:
    """Whether the run's file ``path`` is there, as a file or as anything else the read
    refuses naming it (a link, a FIFO; a folder is not a file)."""
    return (path.exists() or path.is_symlink()) and not path.is_dir()
