"""The base of the training loop's extensions (Chainer's ``Extension``) and their order.

An extension is called with the trainer when its ``trigger`` fires, after each iteration.
``initialize`` runs before the first iteration, ``finalize`` when training ends however it
ends. ``state_dict`` returns what a checkpoint keeps of it, or None when it keeps nothing;
``load_state_dict`` takes it back. Every hook of the base does nothing.

Order (Chainer's rule): extensions are called, initialized and finalized in order of
decreasing ``priority``, and extensions of one priority in the order they were registered
(:meth:`~.trainer.Trainer.extend`). There are three priorities, and no others:

- :data:`PRIORITY_WRITER`: adds to the trainer's observation (the evaluator; the held-out
  evaluator, which writes at the end);
- :data:`PRIORITY_EDITOR`: reads what the writers wrote and changes the run's course before
  anything reports it (the plateau step's learning rate, the objective's ranking, early
  stopping's request);
- :data:`PRIORITY_READER` (the default): reports and keeps (the log, the console, the
  checkpoints, the summary, the profile).

Every other dependency is registration order, and ``cli/extend.py`` registers the built-in
extensions in the order they need: among editors the plateau step, the objective, then early
stopping (it reads the objective's verdict of the same iteration); among readers the log,
the progress (it shows the row just logged), the metrics table (printed after the progress
bar stops), the snapshot (its checkpoint holds the log up to its iteration), the summary (it
finalizes after the last checkpoint is written, so its status counts a failed write), the
loggers' finish (after the summary, which a logger may send on) and the profile report last
(every other finalize is in it). An extension registered later with the
same priority runs after these.

A plain callable (a function, a lambda, or an object with ``__call__`` and some of these
attributes, as Chainer allows) becomes an extension through :func:`as_extension`. A callback
built from the user's code is registered as a :class:`UsersCallback`: what its hooks raise
names it (:mod:`trainer_run.user_code`).
"""

from __future__ import annotations

from ..storage.states import unstorable
from ..targets import Kind, instances_callable
from ..user_code import blame, broke

PRIORITY_WRITER = 300
PRIORITY_EDITOR = 200
PRIORITY_READER = 100

HOOKS = ("initialize", "finalize", "state_dict", "load_state_dict")


KIND = Kind("an extension: an object called with the trainer, __call__(trainer) (see "
            "trainer_run.training.Extension)", fits=instances_callable)
"""What a ``callbacks.<name>._target_`` must build."""


class Extension:
    """Does nothing; subclasses override the hooks they need."""

    trigger = (1, "iteration")
    priority = PRIORITY_READER
    name: str | None = None

    def __call__(self, trainer) -> None:
        """Runs when the trigger fires."""

    def initialize(self, trainer) -> None:
        """Runs once before the first iteration (also of a resumed run)."""

    def finalize(self, trainer) -> None:
        """Runs once when training ends: completed, interrupted, diverged or failed."""

    def state_dict(self) -> dict | None:
        """What a checkpoint keeps of this extension (None: nothing)."""
        return None

    def load_state_dict(self, state: dict) -> None:
        """Takes back what :meth:`state_dict` returned."""


class _Callable(Extension):
    """A plain callable as an :class:`Extension`: called as it is, with its own ``trigger``,
    ``priority``, ``name`` and hooks where it has them. Without a ``name`` it is named by its
    ``__name__`` (a function's, Chainer's rule; ``<lambda>`` for a lambda), and a callable
    object without one by its class name."""

    def __init__(self, function):
        self.function = function
        self.name = getattr(function, "__name__", None) or type(function).__name__
        for attribute in ("trigger", "priority", "name"):
            if getattr(function, attribute, None) is not None:  # None: the default
                setattr(self, attribute, getattr(function, attribute))
        for hook in HOOKS:
            if hasattr(function, hook):
                setattr(self, hook, getattr(function, hook))

    def __call__(self, trainer) -> None:
        self.function(trainer)


def as_extension(extension) -> Extension:
    """``extension`` itself if it is an :class:`Extension`, else the callable wrapped as one."""
    if isinstance(extension, Extension):
        return extension
    if not callable(extension):
        raise TypeError(f"an extension must be callable with the trainer, got {extension!r}")
    return _Callable(extension)


class UsersCallback(Extension):
    """The user's ``callback`` (an extension, or a callable) under config key ``key``: its
    trigger, priority, name and hooks, each hook called through
    :func:`~trainer_run.user_code.blame` (what it raises names the callback). What its
    ``state_dict`` returns is checked at once, before a checkpoint is written: a value a
    checkpoint cannot hold (:func:`~trainer_run.storage.states.unstorable`) is a
    :class:`~trainer_run.errors.UserCodeError` naming the callback and the value, and no
    checkpoint of that iteration is begun. Any other attribute is the callback's."""

    def __init__(self, key: str, callback):
        self.key = key
        self.callback = callback
        self.extension = as_extension(callback)
        self.trigger = self.extension.trigger
        self.priority = self.extension.priority
        self.name = self.extension.name

    def __call__(self, trainer) -> None:
        with blame(self.key, self.callback):
            self.extension(trainer)

    def initialize(self, trainer) -> None:
        with blame(self.key, self.callback, "initialize"):
            self.extension.initialize(trainer)

    def finalize(self, trainer) -> None:
        with blame(self.key, self.callback, "finalize"):
            self.extension.finalize(trainer)

    def state_dict(self) -> dict | None:
        with blame(self.key, self.callback, "state_dict"):
            state = self.extension.state_dict()
        found = unstorable(state)
        if found is not None:
            raise broke(self.key, self.callback, "state_dict",
                        f"returned a value a checkpoint cannot hold at {found}; a state is made "
                        "of dicts, lists, numbers, strings, booleans, None and NumPy arrays")
        return state

    def load_state_dict(self, state: dict) -> None:
        with blame(self.key, self.callback, "load_state_dict"):
            self.extension.load_state_dict(state)

    def __getattr__(self, name):
        if name in ("extension", "callback"):  # not set yet: no recursion
            raise AttributeError(name)
        return getattr(self.extension, name)
