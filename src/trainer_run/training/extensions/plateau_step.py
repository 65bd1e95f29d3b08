"""PlateauStep: gives a plateau scheduler each new value of the metric it monitors."""

from __future__ import annotations

from ...errors import ConfigError
from ..extension import PRIORITY_EDITOR, Extension
from ..trainer import from_update


class PlateauStep(Extension):
    """Calls ``scheduler.step(trainer.observation[scheduler.monitor])`` when the metric is there.

    ``scheduler`` is a :class:`~trainer_run.schedulers.ReduceOnPlateauScheduler` (anything
    with ``monitor`` and ``step(value)``), usually the optimizer's ``lr_scheduler``. Extend
    the trainer with it on the evaluator's trigger, so that it sees each evaluation once::

        trainer.extend(PlateauStep(optimizer.lr_scheduler), trigger=evaluator_trigger)

    An editor: it runs after the evaluator (a writer) of the same iteration has written its
    metrics, and before the readers (the log shows the learning rate it set).

    On an iteration where the monitored key is missing it does nothing, unless a writer (an
    evaluator) reported metrics in that iteration (the observation holds a key that is not the
    training step's, :func:`~..trainer.from_update`): then the key is misspelt or not
    reported, and it raises :class:`~trainer_run.errors.ConfigError` naming the key and the
    metrics that are there. It reads ``trainer.observation`` only and holds no state: the
    scheduler's state is saved with the optimizer.
    """

    priority = PRIORITY_EDITOR
    name = "plateau_step"

    def __init__(self, scheduler):
        if not (callable(getattr(scheduler, "step", None)) and hasattr(scheduler, "monitor")):
            raise TypeError(f"PlateauStep needs a scheduler with `monitor` and `step(value)`, "
                            f"got {type(scheduler).__name__}")
        self.scheduler = scheduler

    def __call__(self, trainer) -> None:
        key = self.scheduler.monitor
        observation = trainer.observation
        if key in observation:
            self.scheduler.step(observation[key])
            return
        if not all(from_update(k) for k in observation):
            raise ConfigError(
                f"scheduler.monitor={key!r} is not among the metrics of this evaluation "
                f"({', '.join(sorted(observation))}); set it to one of them"
            )
