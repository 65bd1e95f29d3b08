"""The exception types for problems a user can act on.

:class:`ConfigError` carries a message that names what is wrong (the key, the value,
what is allowed) and how to fix it; :class:`RunStopped` (:class:`Diverged`,
:class:`StorageError`, :class:`UserCodeError`) says why a run stopped and what was kept. The
command line prints either alone, without a traceback (a UserCodeError with the traceback of
the user's code that raised), and exits non-zero (2 for a ConfigError, the error's
``exit_code`` otherwise). Anything else that goes wrong is a bug and keeps its traceback.
"""

import numbers


class ConfigError(ValueError):
    """A value, name or file given by the user is invalid; the message says how to fix it."""


class RunStopped(RuntimeError):
    """Training stopped for a reason the user can act on; the message says which and what
    was kept. ``exit_code`` is the command's exit status."""

    exit_code = 1


class Diverged(RunStopped):
    """The loss became NaN or infinite (``updater.nan_policy=stop``)."""

    exit_code = 3


class StorageError(RunStopped):
    """The disk refused a write (full, read-only, no permission)."""

    exit_code = 4


class UserCodeError(RunStopped):
    """An object built from the user's code (a callback, a logger, the model, a loader, a
    hook) raised an exception, or broke its contract (a ``state_dict`` a checkpoint cannot
    hold): the message names the object by its config ``key`` and ``name`` (its class, or
    function), and what it raised is the ``__cause__`` (see :mod:`trainer_run.user_code`).
    Never a disk that refused a write of ours, whatever the exception's type."""

    exit_code = 1

    def __init__(self, message: str, key: str, name: str):
        super().__init__(message)
        self.key = key
        self.name = name


class Interrupted(RunStopped):
    """A stop signal (SIGINT, SIGTERM) ended work before training, e.g. a download; the exit
    status is 128 + the signal's number."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.exit_code = 128 + signum


def check(condition: bool, message: str) -> None:
    """Raises :class:`ConfigError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise ConfigError(message)


def check_number(name: str, value, *, low=None, high=None, low_open=False, integer=False):
    """Validates that ``value`` is a real number in range and returns it as int or float.

    ``low`` / ``high`` are inclusive bounds unless ``low_open`` makes ``low`` exclusive.
    Booleans are refused even though Python counts them as integers.
    """
    kind = "an integer" if integer else "a number"
    ok_type = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, ok_type):
        raise ConfigError(f"{name} must be {kind}, got {value!r}")
    if low is not None and (value <= low if low_open else value < low):
        relation = ">" if low_open else ">="
        raise ConfigError(f"{name} must be {relation} {low}, got {value!r}")
    if high is not None and value > high:
        raise ConfigError(f"{name} must be <= {high}, got {value!r}")
    return int(value) if integer else float(value)


def check_choice(name: str, value, choices) -> str:
    """Validates that ``value`` is one of ``choices`` and returns it."""
    if value not in choices:
        raise ConfigError(f"{name}={value!r} is unknown; choose one of {', '.join(map(str, choices))}")
    return value


class JobFailed(Exception):
    """A run cannot start or stopped on an error: a one-line message and the exit status the
    command ends with. ``record``: whether the run's folder may record it (not when it holds a
    run of other overrides, or one it may not load)."""

    def __init__(self, message, exit_code: int = 2, record: bool = True):
        super().__init__(str(message))
        self.exit_code = exit_code
        self.record = record
