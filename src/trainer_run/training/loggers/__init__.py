"""Where the log's rows go: the ``logger`` config group, one module per logger.

:class:`~trainer_run.training.extensions.LogReport` computes the rows; each logger receives
them (see :class:`.base.Logger`). ``jsonl`` (``metrics.jsonl``) and ``csv``
(``metrics.csv``) need nothing beyond the runtime; ``tensorboard`` needs tensorboardX and
``plot`` matplotlib, each from the extra of its name.
"""

from __future__ import annotations

import importlib

from trainer_run.errors import ConfigError

from .base import Logger, RunInfo

LOGGERS = {"jsonl": ("jsonl", "JsonLines", None), "csv": ("csv", "CsvTable", None),
           "tensorboard": ("tensorboard", "TensorBoard", "tensorboardX"),
           "plot": ("plot", "Plot", "matplotlib")}
"""Logger name: its module, its class, and the package its extra installs (None: none)."""
BEFORE_THE_GROUP = {"jsonl": {}}
"""The loggers of a config without a ``logger`` section (a checkpoint from before the group)."""

__all__ = ["BEFORE_THE_GROUP", "LOGGERS", "Logger", "RunInfo", "build"]


def build(sections: dict, run: RunInfo) -> list[Logger]:
    """The loggers ``sections`` (the config's ``logger``: name -> options) name, in that order.
    An unknown name, or one whose package is not installed, is a ConfigError saying what to
    do, raised before anything is written."""
    built = []
    for name, options in sections.items():
        if name not in LOGGERS:
            raise ConfigError(f"logger={name} is not available; choose one of "
                              f"{', '.join(sorted(LOGGERS))}")
        module, cls, package = LOGGERS[name]
        try:
            found = importlib.import_module(f"{__name__}.{module}")
        except ImportError as e:
            if package is None or e.name is None or e.name.split(".")[0] != package.split(".")[0]:
                raise
            raise ConfigError(f'logger={name} needs {package}: pip install "trainer-run[{name}]"'
                              ) from None
        built.append(getattr(found, cls)(**(options or {}), run=run))
    return built
