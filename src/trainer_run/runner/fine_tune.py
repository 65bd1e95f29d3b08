"""``init_from=<run>``: a new run fine-tunes the model of the run its weights come from.

Unless the command names a model itself (``model=NAME`` or any ``model.KEY=...`` override,
with or without ``+``, ``++`` or ``~``), the new run's ``model`` section is the source run's,
read from its ``.hydra/config.yaml`` as :func:`trainer_run.load_model` reads it
(:func:`trainer_run.runner.trained.read_sections`: interpolations resolved and the trust check made,
so a model of someone else's code needs ``trust=true``) and put into the new config as data
(:func:`literal`: a ``${...}`` that is text there stays text), and one line says so. So
``trainer-run init_from=<run> optimizer.learning_rate=1e-4`` fine-tunes a ``model=cnn`` run as
a CNN, not as the default MLP. How the new run trains that model is its own choice: the
runner's keys ``model.freeze``, ``lr_mult`` and ``wd_mult``
(:mod:`trainer_run.models.parameter_rules`) come from the command and do not count as naming
a model (``init_from=<run> 'model.freeze=[conv1]'`` fine-tunes the source's CNN with its
first convolution frozen). The source run is the run folder (our record,
:func:`trainer_run.runs.directory.is_run`) the weights belong to: the one named, the run of a
checkpoint ``<run>/checkpoints/iter_<N>`` (or ``checkpoints/best``), or the folder of an
``.npz`` file such as ``<run>/model.npz``. Weights outside any run leave the command's model.
A resumed run keeps the model of its checkpoint, as any resume does.

:func:`load_weights` then loads the weights into the built model.
"""

from __future__ import annotations

import re
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from trainer_run.compose import argv as args
from trainer_run.console import say, warn
from trainer_run.errors import ConfigError, check
from trainer_run.models import parameter_rules
from trainer_run.runner.trained import read_sections
from trainer_run.runs import directory as run_directory
from trainer_run.runs import weights

_INTERPOLATION = re.compile(r"(\\*)\$\{")


def source_model(cfg: DictConfig, overrides: list[str]) -> tuple[DictConfig, str | None]:
    """``cfg`` with the source run's ``model`` section (see the module docstring), and the
    line that says so; ``cfg`` itself and None when the model stays the command's."""
    run = _source_run(cfg, overrides)
    if run is None:
        return cfg, None
    section = read_sections(run, ("model",), cfg.get("trust") is True)["model"]
    tree = OmegaConf.to_container(cfg, resolve=False)
    rules = {k: v for k, v in tree["model"].items() if k in parameter_rules.KEYS}
    tree["model"] = {**{k: literal(v) for k, v in section.items() if k not in parameter_rules.KEYS},
                     **rules}
    return OmegaConf.create(tree), (f"init_from: model section from {run} ({section.get('_target_')}); "
                                    "name model=... to choose another")


def literal(value):
    """``value`` (resolved data: a source run's section) as OmegaConf must hold it to give it back
    as it is when the new config is resolved: in every string, each ``${`` escaped as OmegaConf
    escapes it (``\\${``, the backslashes before it doubled), so a ``${oc.env:...}`` that was
    text in the source run is text in the new run, never read from this user's environment."""
    if isinstance(value, str):
        return _INTERPOLATION.sub(lambda m: "\\" * (2 * len(m.group(1)) + 1) + "${", value)
    if isinstance(value, dict):
        return {k: literal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [literal(v) for v in value]
    return value


def _source_run(cfg: DictConfig, overrides: list[str]) -> Path | None:
    """The run whose model a new run with ``init_from`` fine-tunes, or None: on a resume,
    with a model named on the command line, or for weights that belong to no run."""
    source = cfg.get("init_from")
    if source is None or cfg.get("resume") or _names_model(overrides):
        return None
    try:
        found = weights.resolve(source)
    except ConfigError:  # the load says what is wrong with it, in its own words
        return None
    path = found.path
    if path.is_dir():
        return run_directory.owner(path)
    return path.parent if run_directory.is_run(path.parent) else None


def _names_model(overrides: list[str]) -> bool:
    keys = [args.key(o).lstrip("+~") for o in overrides]
    return any(k == "model" or (k.startswith("model.") and
                                k.split(".")[1] not in parameter_rules.KEYS) for k in keys)


def load_weights(built, source, strict, speaks: bool) -> dict:
    """Loads the weights ``init_from`` names into the new run's model (before the updater
    copies it into replicas and processes): all of them with ``strict``, else those that
    match, with one warning listing the rest; ``speaks``: this process says what it loaded
    (rank 0). Returns the record the summary keeps."""
    check(isinstance(strict, bool), f"init_from_strict must be true or false, got {strict!r}")
    try:
        found = weights.resolve(source)
        loaded, skipped = weights.initialize(built.model, found.arrays(), strict,
                                             built.backend.asarray)
    except ConfigError as e:
        raise ConfigError(f"init_from={source}: {e}") from None
    if speaks:
        if found.warning is not None:
            warn(found.warning)
        say(f"init_from: {len(loaded)} arrays from {found.describe()}")
        if skipped:
            warn(f"init_from: not loaded: {'; '.join(skipped)}")
    return {**found.as_json(), "loaded": len(loaded), "not_loaded": skipped}
