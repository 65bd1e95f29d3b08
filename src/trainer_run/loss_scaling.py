"""Loss scaling: multiply the loss before backward so small float16 gradients survive.

The updater seeds backward with the scale instead of one, so every gradient comes out
multiplied by it; the optimizer then sees the gradients divided by the same scale (its step
is given ``rescale_grad / scale`` as the gradient factor, as MXNet's AMP folds the scale into
``rescale_grad``, so the division happens in the optimizer's precision: float32 for
multi-precision float16 weights). Two scalers:

- :class:`LossScaler` (static): a fixed scale; gradients are never checked.
- :class:`DynamicLossScaler` (nnabla's ``DynamicLossScalingUpdater``): when any gradient
  holds inf or NaN the scale is divided by ``scaling_factor`` and the clean-step count
  restarts; the step is then skipped (``on_overflow="skip"``, PyTorch GradScaler's way)
  or recomputed on new data (``"retry"``, nnabla's way) up to ``max_retries`` times and
  skipped after that. After ``interval`` consecutive clean steps (``growth``, below) the
  scale is multiplied by ``scaling_factor``.

Our rules where nnabla is loose: a skipped step leaves parameters, optimizer states and the
optimizer's update count untouched, but it is still an iteration of the training loop;
``skipped_steps`` counts steps that were finally skipped (retries that succeed are not
counted).

When the scale grows (``growth``, :data:`GROWTH`):

- ``"interval"`` (ours, the default): after exactly ``interval`` consecutive clean steps.
- ``"nnabla"``: nnabla's counter exactly. Its ``update`` ends a clean step with
  ``if self._counter > self.N: self.scale *= self.scaling_factor; self._counter = 0`` and then
  ``self._counter += 1``, and an overflow sets ``self._counter = 0``. The counter starts at 0
  (``__init__``) and is 0 after an overflow, so the test ``> N`` first passes on the clean step
  that finds it at N + 1: the first growth (and the first after an overflow) comes after N + 2
  clean steps. The step that grows resets the counter to 0 and then increments it to 1, so
  each later growth comes after N + 1. ``clean_steps`` then holds nnabla's ``_counter``.
"""

from __future__ import annotations

from .errors import check_choice, check_number

ON_OVERFLOW = ("skip", "retry")
GROWTH = ("interval", "nnabla")
"""When the dynamic scale grows: see the module docstring."""


class LossScaler:
    """A fixed loss scale.

    Args:
        scale: the factor the loss (and so every gradient) is multiplied by.
    """

    dynamic = False

    def __init__(self, scale: float = 1024.0):
        self.scale = float(check_number("scale", scale, low=0, low_open=True))

    def record(self, finite: bool) -> str:
        """The verdict on one computed set of gradients: always ``"apply"``."""
        return "apply"

    def readings(self) -> dict:
        """Values shown in the progress bar and written to ``metrics.jsonl``."""
        return {"loss_scale": self.scale}

    def state_dict(self) -> dict:
        """Nothing: a static scale is a hyper-parameter (the constructor's)."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class DynamicLossScaler(LossScaler):
    """A loss scale that backs off on overflow and grows after clean steps.

    Args:
        scale: the initial scale (nnabla's default 8).
        scaling_factor: the factor of every back-off and growth.
        interval: clean steps between growths (nnabla's ``N``).
        on_overflow: ``"skip"`` the step or ``"retry"`` it on new data.
        max_retries: retries of one step before it is skipped (nnabla: 100).
        growth: ``"interval"`` (grow after exactly ``interval`` clean steps) or ``"nnabla"``
            (nnabla's counter: N + 2 clean steps before the first growth, N + 1 between later
            ones; see the module docstring).
    """

    dynamic = True

    def __init__(self, scale: float = 8.0, scaling_factor: float = 2.0, interval: int = 2000,
                 on_overflow: str = "skip", max_retries: int = 100, growth: str = "interval"):
        super().__init__(scale)
        self.scaling_factor = float(check_number("scaling_factor", scaling_factor, low=1, low_open=True))
        self.interval = check_number("interval", interval, low=1, integer=True)
        self.on_overflow = check_choice("on_overflow", on_overflow, ON_OVERFLOW)
        self.max_retries = check_number("max_retries", max_retries, low=0, integer=True)
        self.growth = check_choice("growth", growth, GROWTH)
        nnabla = self.growth == "nnabla"
        self.grows_at = self.interval + 2 if nnabla else self.interval
        """The count of ``clean_steps`` (after a clean step adds one) from which the scale grows."""
        self.after_growth = 1 if nnabla else 0
        """``clean_steps`` after the step that grew the scale."""
        self.clean_steps = 0
        self.retries = 0
        self.skipped_steps = 0

    def record(self, finite: bool) -> str:
        """Updates the scale from one gradient check and returns what the updater does:
        ``"apply"`` the step, ``"retry"`` it on new data, or ``"skip"`` it."""
        if finite:
            self.retries = 0
            self.clean_steps += 1
            if self.clean_steps >= self.grows_at:
                self.scale *= self.scaling_factor
                self.clean_steps = self.after_growth
            return "apply"
        self.scale /= self.scaling_factor
        self.clean_steps = 0
        if self.on_overflow == "retry" and self.retries < self.max_retries:
            self.retries += 1
            return "retry"
        self.retries = 0
        self.skipped_steps += 1
        return "skip"

    def readings(self) -> dict:
        return {"loss_scale": self.scale, "skipped_steps": self.skipped_steps}

    def state_dict(self) -> dict:
        return {"scale": self.scale, "clean_steps": self.clean_steps, "retries": self.retries,
                "skipped_steps": self.skipped_steps}

    def load_state_dict(self, state: dict) -> None:
        self.scale = float(state["scale"])
        self.clean_steps = int(state["clean_steps"])
        self.retries = int(state["retries"])
        self.skipped_steps = int(state["skipped_steps"])
