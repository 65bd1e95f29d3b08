"""The one exception type for mistakes a user can fix.

:class:`ConfigError` carries a message that names what is wrong (the key, the value,
what is allowed) and how to fix it. The command line prints it alone, without a traceback,
and exits non-zero. Anything else that goes wrong is a bug and keeps its traceback.
"""

import numbers


class ConfigError(ValueError):
    """A value, name or file given by the user is invalid; the message says how to fix it."""


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
