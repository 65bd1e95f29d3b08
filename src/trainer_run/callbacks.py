"""Callbacks around the stages of one update (nnabla's ``Updater`` callbacks).

Eight hooks, each a callable or a list of callables called with the iteration (the number
of updates completed before the current one):

- ``forward_on_start`` / ``forward_on_finish``: around each micro-batch's forward pass;
- ``backward_on_start`` / ``backward_on_finish``: around each micro-batch's backward pass;
- ``comm_on_start`` / ``comm_on_finish``: around the gradient reduction through a
  kvstore (only when the updater reduces across replicas or processes);
- ``update_on_start`` / ``update_on_finish``: around the optimizer step (not called for a
  step that dynamic loss scaling skips).

With ``accum_grad=k`` the forward and backward hooks run k times per update, the comm and
update hooks once. (nnabla's seed calls ``forward_callback_on_finish`` twice and never
``forward_callback_on_start``; here each hook runs at its own place.)
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

from .user_code import blame

HOOKS = (
    "forward_on_start", "forward_on_finish",
    "backward_on_start", "backward_on_finish",
    "comm_on_start", "comm_on_finish",
    "update_on_start", "update_on_finish",
)


class Callbacks:
    """The hooks of an updater; ``callbacks.fire(hook, iteration)`` calls a hook's callables.

    Args:
        hooks: hook name -> a callable, a list of callables, or None.
    """

    def __init__(self, hooks: Mapping[str, Callable | Iterable[Callable] | None] | None = None):
        self._hooks: dict[str, list[Callable]] = {name: [] for name in HOOKS}
        for name, value in (hooks or {}).items():
            if name not in self._hooks:
                raise KeyError(f"{name} is not a callback hook; choose one of {', '.join(HOOKS)}")
            for fn in _as_list(value):
                self.add(name, fn)

    def add(self, hook: str, fn: Callable) -> None:
        """Appends ``fn`` to ``hook``'s callables."""
        if hook not in self._hooks:
            raise KeyError(f"{hook} is not a callback hook; choose one of {', '.join(HOOKS)}")
        if not callable(fn):
            raise TypeError(f"callback for {hook} must be callable, got {fn!r}")
        self._hooks[hook].append(fn)

    def fire(self, hook: str, iteration: int) -> None:
        """Calls ``hook``'s callables with ``iteration``; what one of the user's raises names
        it (``updater.callbacks.<hook>``, :func:`trainer_run.user_code.blame`)."""
        fns = self._hooks.get(hook)
        if fns is None:
            raise KeyError(f"{hook} is not a callback hook; choose one of {', '.join(HOOKS)}")
        for fn in fns:
            with blame(f"updater.callbacks.{hook}", fn):
                fn(iteration)

    def __getitem__(self, hook: str) -> list[Callable]:
        if hook not in self._hooks:
            raise KeyError(f"{hook} is not a callback hook; choose one of {', '.join(HOOKS)}")
        return self._hooks[hook]


def _as_list(value) -> list:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]
