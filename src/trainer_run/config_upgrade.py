"""Saved configs of the old form, upgraded to the one this version builds from.

Runs made before the runner's own groups named their callable with ``_target_`` saved those
groups by ``name`` (in ``state.json``'s ``config`` and ``.hydra/config.yaml``)::

    backend:    {name: numpy, device: 0}
    precision:  {name: fp16}
    loss_scale: {name: static, scale: 1024.0}
    updater:    {name: standard, accum_grad: 1, callbacks: {...}}
    kvstore:    {name: device, update_on_kvstore: null, compression: {...}}

and runs made before the updater's arguments moved into its section saved them where they
were (:data:`MOVED`): ``trainer.nan_policy``, ``trainer.max_skipped_in_a_row``,
``dataset.prefetch``, ``optimizer.clip_global_norm``.

:func:`upgrade` turns such a config into the form the config files compose today. It is the
only place that knows the old names; a resume (``trainer_run.runs.resume.config``) and
:func:`trainer_run.load_model` read a saved config through it, and the command line's old keys
are renamed by :func:`renamed` (``trainer.nan_policy=skip`` is ``updater.nan_policy=skip``).
"""

from __future__ import annotations

import copy

from .errors import ConfigError

BACKEND = "trainer_run.backend.get_backend"
KVSTORE = "trainer_run.kvstore.request.KVStoreRequest"
DTYPES = {"fp32": "float32", "fp16": "float16"}
"""The old ``precision.name`` values and the compute dtype (``backend.dtype``) each chose."""
TARGETS = {
    "loss_scale": {"none": None, "static": "trainer_run.loss_scaling.LossScaler",
                   "dynamic": "trainer_run.loss_scaling.DynamicLossScaler"},
    "updater": {"standard": "trainer_run.updaters.StandardUpdater",
                "parallel": "trainer_run.updaters.ParallelUpdater"},
}
"""The ``_target_`` of each old ``name`` of the groups whose other keys stayed as they were."""
MOVED = {
    "trainer.nan_policy": "updater.nan_policy",
    "trainer.max_skipped_in_a_row": "updater.max_skipped_in_a_row",
    "dataset.prefetch": "updater.prefetch",
    "optimizer.clip_global_norm": "updater.clip_global_norm",
}
"""Keys that moved into the section of the object that reads them: old name, new name."""


def upgrade(config: dict) -> dict:
    """A copy of the saved ``config`` with every section of the old form (a ``name`` and no
    ``_target_``) in the new one: ``precision: {name: fp16}`` becomes ``backend.dtype:
    float16``; ``loss_scale`` and ``updater`` get the ``_target_`` of their old name (null for
    ``loss_scale: {name: none}``); ``backend`` gets ``_target_: get_backend`` and keeps its
    ``name`` as the array module; ``kvstore`` gets ``_target_: KVStoreRequest`` and its
    ``name`` becomes ``type``; each key of :data:`MOVED` moves to its new section (where the
    new key is set too, the new one is kept). A config of the new form comes back unchanged; a
    section of a name no run could have had raises :class:`~trainer_run.errors.ConfigError`."""
    config = copy.deepcopy(config)
    dtype = _dtype(config.pop("precision", None))
    for group, targets in TARGETS.items():
        if _old(config.get(group)):
            section = config[group]
            name = section.pop("name")
            config[group] = {"_target_": _known(targets, group, name), **section}
    if _old(config.get("kvstore")):
        section = dict(config["kvstore"])
        config["kvstore"] = {"_target_": KVSTORE, "type": section.pop("name"), **section}
    if _old(config.get("backend")):
        config["backend"] = {"_target_": BACKEND, **config["backend"]}
    if dtype is not None and isinstance(config.get("backend"), dict):
        config["backend"].setdefault("dtype", dtype)
    for old, new in MOVED.items():
        _move(config, old, new)
    return config


def _move(config: dict, old: str, new: str) -> None:
    """Moves the value at the dotted key ``old`` of ``config`` to ``new`` (both ``section.key``)
    when both sections are there."""
    section, _, name = old.partition(".")
    target, _, new_name = new.partition(".")
    if isinstance(config.get(section), dict) and name in config[section] and \
            isinstance(config.get(target), dict):
        config[target].setdefault(new_name, config[section].pop(name))


def renamed(argv: list[str]) -> tuple[list[str], list[str]]:
    """``argv`` with each override of an old key of :data:`MOVED` (``trainer.nan_policy=skip``,
    ``+``/``++``/``~`` forms and sweeps alike) written with its new key, and the old keys found,
    each once, in the order given."""
    out, found = [], []
    for argument in argv:
        name, sep, rest = argument.partition("=")
        bare = name.lstrip("+~")
        if bare in MOVED and (sep or name.startswith("~")) and not argument.startswith("-"):
            argument = f"{name[:len(name) - len(bare)]}{MOVED[bare]}{sep}{rest}"
            found += [bare] if bare not in found else []
        out.append(argument)
    return out, found


def _old(section) -> bool:
    return isinstance(section, dict) and "name" in section and "_target_" not in section


def _dtype(precision) -> str | None:
    """The compute dtype an old ``precision`` section chose (None: no such section)."""
    if not _old(precision):
        return None
    return _known(DTYPES, "precision", precision["name"])


def _known(table: dict, group: str, name):
    if name not in table:
        raise ConfigError(f"the saved config's {group}.name={name!r} is none this version knows "
                          f"({', '.join(table)}); it was not saved by trainer-run")
    return table[name]
