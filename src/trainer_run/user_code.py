"""The user's code inside a run: which object an exception came from.

A run calls objects its config builds from the user's code: the callbacks
(``callbacks.<name>``), the loggers (``logger.<name>``), the model (``model``), the loader
(``dataset``), the ``updater.callbacks`` hooks, and any other ``_target_`` of theirs. An
exception one of them raises is theirs to read and fix, whatever its type: an ``OSError`` (a
server that refuses a connection, a file it cannot read) is never a disk that refused one of
the run's own writes, which raise :class:`~trainer_run.errors.StorageError` (exit 4).

:func:`blame` runs a call into such an object and re-raises what it raised as a
:class:`~trainer_run.errors.UserCodeError` naming the object by its config key and its class
(or function), with the original as its ``__cause__``, whose traceback shows the user's code.
A ``SystemExit`` is such an error too: a run ends by its limits or a stop request, with its
checkpoint and summary, never by an exit inside training. Passed on as they are: the errors
that already say what to do (a ConfigError; a :class:`~trainer_run.errors.RunStopped`, such as
a StorageError from our writing helpers or a divergence), a MemoryError (the command's own
line), KeyboardInterrupt (a stop), and anything raised by an object of trainer-run's own
(:func:`is_ours`): that is a bug of ours and keeps its traceback as it is.

What the user's code returns is checked where it returns: :func:`check_loss` for a model's
training loss (:func:`broke` names the object and what it must return).
"""

from __future__ import annotations

import contextlib
import functools
import inspect

from .autograd import Variable
from .errors import ConfigError, RunStopped, UserCodeError

OURS = "trainer_run."
PASSED = (ConfigError, RunStopped, MemoryError, KeyboardInterrupt, GeneratorExit)
"""What :func:`blame` passes on unchanged."""
_NOTHING = contextlib.nullcontext()


def name_of(obj) -> str:
    """The dotted name of what ``obj`` is or was built by: a class's or function's own (a
    ``functools.partial``'s function's), else the object's class's."""
    name = _BY_CLASS.get(type(obj))
    if name is not None:
        return name
    while isinstance(obj, functools.partial):
        obj = obj.func
    if isinstance(obj, type) or inspect.isroutine(obj):
        return _dotted(obj)
    name = _BY_CLASS[type(obj)] = _dotted(type(obj))
    return name


_BY_CLASS: dict[type, str] = {}
"""The names of the classes whose instances are named by their class (whether an object is a
class, a routine or a partial depends on its class alone)."""


def _dotted(target) -> str:
    qualname = getattr(target, "__qualname__", None) or getattr(target, "__name__", repr(target))
    module = getattr(target, "__module__", None)
    return f"{module}.{qualname}" if module else qualname


def is_ours(obj) -> bool:
    """Whether ``obj`` is (or was built by) trainer-run's own code."""
    return name_of(obj).startswith(OURS)


def described(key: str, obj, method: str | None = None) -> str:
    """``key (name)``, or ``key (name).method()``: how a message names the object."""
    return f"{key} ({name_of(obj)})" + (f".{method}()" if method else "")


def blame(key: str, obj, method: str | None = None):
    """A context for the block, a call into ``obj`` (config ``key``; ``method``: which of its
    methods, None for a call of the object itself): an exception it raises becomes a
    UserCodeError naming the object, as the module docstring says. For an object of
    trainer-run's own the context does nothing."""
    return _NOTHING if is_ours(obj) else _Blamed(key, obj, method)


class _Blamed:
    __slots__ = ("key", "obj", "method")

    def __init__(self, key: str, obj, method: str | None):
        self.key, self.obj, self.method = key, obj, method

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback) -> bool:
        if error is None or isinstance(error, PASSED):
            return False
        raise raised(self.key, self.obj, error, self.method) from error


def raised(key: str, obj, error: BaseException, method: str | None = None) -> UserCodeError:
    """The UserCodeError for ``error``, raised by ``obj``."""
    who = described(key, obj, method)
    if isinstance(error, SystemExit):
        text = (f"{who} raised SystemExit({error.code!r}) during training; a run ends at its "
                "limits or by trainer.request_stop(reason) (a callback's), with its checkpoint "
                "and summary")
    else:
        text = f"{who} raised {type(error).__name__}" + (f": {error}" if str(error) else "")
    return UserCodeError(text, key, name_of(obj))


def broke(key: str, obj, method: str, what: str) -> UserCodeError:
    """The UserCodeError for ``obj``'s ``method`` that returned something it may not:
    ``what`` says what and what it must be."""
    return UserCodeError(f"{described(key, obj, method)} {what}", key, name_of(obj))


def check_loss(model, loss) -> None:
    """Refuses a training loss that backward cannot start from (a Python float, a NumPy
    array, a dict without ``"loss"``: anything but a :class:`~trainer_run.autograd.Variable`),
    in one line naming the model and what its call must return."""
    if isinstance(loss, Variable):
        return
    given = "no 'loss'" if isinstance(loss, dict) else f"a {type(loss).__name__} as its loss"
    raise broke("model", model, "__call__", f"returned {given}; in training it must return the "
                "loss as a trainer_run.autograd.Variable computed from its parameters with "
                "trainer_run.functions (e.g. F.softmax_cross_entropy(self.forward(x), t)), alone "
                "or as 'loss' in a dict of metrics; a loss computed in NumPy needs "
                "loss_and_grads(x, t) instead (docs/models.md)")
