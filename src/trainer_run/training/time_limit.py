"""``trainer.max_time``: a limit on one session's training time, as Lightning's ``max_time``.

The limit is given as seconds (a number > 0) or as a string ``DD:HH:MM:SS``, the form
Lightning writes (``00:12:00:00`` is twelve hours): four fields of digits, days, hours,
minutes and seconds (a negative one is refused, by name); a field may exceed its usual range
(``00:36:00:00`` is 36 hours), as Lightning's ``timedelta`` allows. The time counted is the
wall clock of the training loop of this session (:func:`time.monotonic` from the start of
:meth:`~trainer_run.training.Trainer.run`): start-up and the time before a resume do not
count, so a resumed run gets the whole limit again. The run stops after the iteration that
crosses it (see :class:`~trainer_run.training.Trainer`).
"""

from __future__ import annotations

import math
import re

from ..errors import ConfigError, check_number

REASON = "max_time"
"""The :attr:`~trainer_run.training.Trainer.stop_reason` of a run the limit ended."""

_FORM = re.compile(r"(-?\d+):(-?\d+):(-?\d+):(-?\d+)")
_FIELDS = ("days", "hours", "minutes", "seconds")


def seconds(value) -> float | None:
    """``value`` (None, a number of seconds, or ``DD:HH:MM:SS``) as seconds > 0, or None for
    no limit; anything else is a :class:`~trainer_run.errors.ConfigError` naming
    ``max_time``."""
    if value is None:
        return None
    if isinstance(value, str):
        value = _from_fields(value)
    else:
        value = check_number("max_time", value, low=0, low_open=True)
    if not math.isfinite(value):
        raise ConfigError(f"max_time must be a finite number of seconds, got {value!r}; "
                          "null sets no limit")
    return value


def _from_fields(text: str) -> float:
    match = _FORM.fullmatch(text.strip())
    if match is None:
        raise ConfigError(f"max_time must be seconds (a number > 0) or DD:HH:MM:SS (days, hours, "
                          f"minutes, seconds: 00:12:00:00 is twelve hours), got {text!r}")
    days, hours, minutes, secs = fields = [int(field) for field in match.groups()]
    negative = [f"{name} is {value}" for name, value in zip(_FIELDS, fields) if value < 0]
    if negative:
        raise ConfigError(f"max_time must be DD:HH:MM:SS of whole numbers >= 0, got {text!r} "
                          f"({', '.join(negative)}); 00:01:00:00 is one hour")
    total = ((days * 24 + hours) * 60 + minutes) * 60 + secs
    if total == 0:
        raise ConfigError(f"max_time must be more than 0 seconds, got {text!r}; null sets no limit")
    return float(total)


def written(limit: float) -> str:
    """``limit`` (seconds) as a line shows it: ``43200 s (00:12:00:00)``."""
    whole = int(limit)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{limit:g} s ({days:02d}:{hours:02d}:{minutes:02d}:{secs:02d})"
