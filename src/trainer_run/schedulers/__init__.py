"""Learning-rate schedules with MXNet 1.9's class names, arguments and values.

A scheduler is called with ``num_update``, the optimizer's count of updates (1 at the
first update), and returns the learning rate. The schedule owns the rate: an optimizer
given one asks it at every update. As in MXNet 1.9, an optimizer built with an explicit
``learning_rate`` overwrites the scheduler's ``base_lr`` with it; schedules that keep a
private copy of their starting rate (``CosineScheduler.base_lr_orig`` and the warmup target
``warmup_final_lr``) take it at construction, exactly as MXNet does, so pass the same rate
to both, or ``learning_rate=None`` to the optimizer (the command line does).

``FactorScheduler`` and ``MultiFactorScheduler`` change their ``base_lr`` as they are
called (MXNet's stateful schedules); ``ReduceOnPlateauScheduler`` (not in MXNet) is also
given each new value of a monitored metric through ``step(value)``.

Every scheduler exposes its progress through ``state_dict`` / ``load_state_dict`` so that a
checkpoint restores the schedule exactly. The state holds progress only (how many
reductions a stateful schedule has made, the last update a decay computed, a plateau's
metric history), never a parameter: ``base_lr``, ``factor``, ``step``, ``final_lr`` and the
rest come from the constructor (and the optimizer's ``learning_rate``). A state loaded into
a scheduler built with other parameters therefore continues the schedule those parameters
define, from the same progress: a resumed run with a new learning rate uses it at once.
Load a state into a newly built scheduler.
"""

from .base import REGISTRY, ConstantScheduler, LRScheduler, create, register
from .decay import CosineScheduler, DecayScheduler, PolyScheduler
from .plateau import ReduceOnPlateauScheduler
from .steps import FactorScheduler, MultiFactorScheduler

__all__ = ["REGISTRY", "ConstantScheduler", "CosineScheduler", "DecayScheduler", "FactorScheduler",
           "LRScheduler", "MultiFactorScheduler", "PolyScheduler", "ReduceOnPlateauScheduler",
           "create", "register"]
