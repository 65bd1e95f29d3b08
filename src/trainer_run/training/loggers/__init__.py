"""Where the log's rows go: the ``logger`` config group, one module per logger.

:class:`~trainer_run.training.extensions.LogReport` computes the rows; each logger receives
them (see :class:`.base.Logger`). Each option of the group (``configs/logger/<name>.yaml``)
holds ``<name>: {_target_: ..., <arguments>}``; a user's logger is one more such file (in a
``--config-dir``) or ``+logger.<name>._target_=...``, built the same way. ``jsonl``
(``metrics.jsonl``) and ``csv`` (``metrics.csv``) need nothing beyond the runtime;
``tensorboard`` needs tensorboardX and ``plot`` matplotlib, each from the extra of its name.
"""

from __future__ import annotations

from ...targets import Kind, instantiate
from .base import Logger, RunInfo

KIND = Kind("a logger: an object with start(out, rows), write(row) and close() (see "
            "trainer_run.training.loggers.Logger)",
            fits=lambda o: all(callable(getattr(o, m, None)) for m in ("start", "write", "close")))
BEFORE_THE_GROUP = {"jsonl": {"_target_": "trainer_run.training.loggers.jsonl.JsonLines"}}
"""The loggers of a config without a ``logger`` section (a checkpoint from before the group)."""

__all__ = ["BEFORE_THE_GROUP", "KIND", "Logger", "RunInfo", "build"]


def build(sections: dict, run: RunInfo) -> list[Logger]:
    """The loggers ``sections`` (the config's ``logger``: name -> ``{_target_, arguments}``)
    name, in that order, each given ``run`` when it takes it. A target that cannot be
    imported or is not a logger, or a missing package, is a ConfigError saying what to do,
    raised before anything is written."""
    return [instantiate(f"logger.{name}", dict(options or {}), {"run": run}, kind=KIND)
            for name, options in sections.items()]
