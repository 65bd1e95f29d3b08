"""The updater protocol (trainer_run.updaters.protocol) names everything its readers use: no
module outside updaters/ reads a member of an updater that the protocol does not list."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

from trainer_run.updaters import protocol

SRC = Path(protocol.__file__).resolve().parents[1]
CLI = SRC.parents[1] / "cli"


def members() -> set[str]:
    """The protocol's attributes, properties and methods."""
    names = set(protocol.Updater.__annotations__)
    names |= {name for name in vars(protocol.Updater) if not name.startswith("_")}
    return names


def read_members(path: Path) -> set[tuple[str, int, str]]:
    """``(file, line, member)`` of each ``updater.<member>`` and ``<x>.updater.<member>`` read in
    ``path``. ``updater.get(...)`` is a dict's (a config section or a
    checkpoint's part by that name), not an updater's."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Attribute):
            continue
        value = node.value
        if (isinstance(value, ast.Name) and value.id == "updater") or \
                (isinstance(value, ast.Attribute) and value.attr == "updater"):
            if node.attr != "get":
                found.add((path.name, node.lineno, node.attr))
    return found


def readers() -> list[Path]:
    """Every module of the library and the command outside the updaters themselves."""
    files = [p for p in SRC.rglob("*.py") if "updaters" not in p.relative_to(SRC).parts]
    return files + sorted(CLI.rglob("*.py"))


def test_every_member_a_reader_uses_is_in_the_protocol():
    used = set().union(*(read_members(p) for p in readers()))
    outside = sorted(u for u in used if u[2] not in members())
    assert outside == []
    # the scan sees the readers it is meant to hold (not a vacuous pass)
    assert {"kept", "previous_epoch_detail", "get_model", "workers_change", "rank",
            "iteration"} <= {u[2] for u in used}


def test_the_main_store_is_read_through_the_protocol_alone():
    lines = [f"{p.name}:{n}" for p in readers()
             for n, line in enumerate(p.read_text().splitlines(), 1) if 'stores["main"]' in line]
    assert lines == []


def test_main_store_is_the_main_models_store():
    main, other = object(), object()
    updater = SimpleNamespace(stores={"other": other, "main": main})
    assert protocol.main_store(updater) is main


def test_the_standard_updater_has_every_member():
    from trainer_run.updaters import StandardUpdater
    assert members() - {"iteration", "observation", "rank", "kept", "stores"} <= set(
        dir(StandardUpdater))
