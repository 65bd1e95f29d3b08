"""The command's side of :mod:`trainer_run.targets`: every group's section is called with the
keys the group shares (``configs/_<group>.yaml``) known, so that a shared key the callable
does not take is left out rather than refused."""

from __future__ import annotations

from trainer_run import targets
from trainer_run.compose.options import shared_section
from trainer_run.targets import accepted, call, check_arguments, locate, prefixed  # noqa: F401


def arguments(group: str, section: dict, standard: dict | None = None, runner=(), kind=None):
    """:func:`trainer_run.targets.arguments` with ``group``'s shared keys."""
    return targets.arguments(group, section, standard, runner=runner,
                             shared=shared_section(group.split(".")[0]), kind=kind)


def instantiate(group: str, section: dict, standard: dict | None = None, runner=(), kind=None):
    """:func:`trainer_run.targets.instantiate` with ``group``'s shared keys."""
    return targets.instantiate(group, section, standard, runner=runner,
                               shared=shared_section(group.split(".")[0]), kind=kind)
