"""An updater's iterators, optimizers and models by name, as Chainer's updaters hold them, and
the getters Chainer's extensions call on them.

Each may be given as a dict by name, which must include ``'main'``, or bare, which is
registered as ``'main'``; there is one model per optimizer, of the same name. The epoch an
updater reports is its main iterator's.
"""

from __future__ import annotations

from ..optimizers import Optimizer

__all__ = ["NamedParts", "by_name"]


def by_name(value, kind: str) -> dict:
    """``value`` as a dict by name: a dict as it is (it must include ``'main'``; ``kind``
    names it in the error), else ``{'main': value}``."""
    if isinstance(value, dict):
        if "main" not in value:
            raise KeyError(f"{kind} given by name must include 'main'")
        return dict(value)
    return {"main": value}


class NamedParts:
    """Chainer's updater interface over the iterators, optimizers and models by name
    (:meth:`name_parts` sets them): the main iterator's epoch and the getters."""

    def name_parts(self, iterator, optimizer, model) -> None:
        """Holds ``iterator``, ``optimizer`` and ``model`` by name (see the module); KeyError
        when the models and the optimizers do not have the same names."""
        self._iterators = by_name(iterator, "iterators")
        self._optimizers: dict[str, Optimizer] = by_name(optimizer, "optimizers")
        self._models = by_name(model, "models")
        if set(self._models) != set(self._optimizers):
            raise KeyError("models and optimizers must have the same names")

    @property
    def epoch(self) -> int:
        return self._iterators["main"].epoch

    @property
    def epoch_detail(self) -> float:
        return self._iterators["main"].epoch_detail

    @property
    def previous_epoch_detail(self):
        return self._iterators["main"].previous_epoch_detail

    @property
    def is_new_epoch(self) -> bool:
        return self._iterators["main"].is_new_epoch

    def get_iterator(self, name: str):
        return self._iterators[name]

    def get_optimizer(self, name: str) -> Optimizer:
        return self._optimizers[name]

    def get_all_optimizers(self) -> dict:
        return dict(self._optimizers)

    def get_model(self, name: str = "main"):
        return self._models[name]
