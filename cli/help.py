"""``trainer-run --help``: what the command does and every config group with a line per option;
``trainer-run <group>=<option> --help``: that option's fields with their values and meaning.

The text comes from the config files themselves (Hydra's help template has no place for a
description per option). An option's description is the first sentence of the comment block
that opens its file (``# @package`` lines aside), "(no description)" without one. A field's
description is the comment on its line, else the comment lines right above it; an option's
fields take their comments from its file, then from the files its defaults list names (the
group's shared ``configs/_<group>.yaml``, another option it extends). Option files in a
``--config-dir`` folder are listed and described like ours; theirs win on a name clash, as
in Hydra.

The text fits 100 columns (fewer on a narrower terminal) and carries no escape codes when
standard output is not a terminal.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from trainer_run.compose import argv as args
from trainer_run.compose.options import (
    CONFIGS,
    GROUPS,
    OPTIONS,
    PRESETS,
    ROOT,
    default_choice,
    is_global,
    opening_comments,
    option_section,
    top_level,
)
from trainer_run.storage.yaml_files import read

WIDTH = 100
NO_DESCRIPTION = "(no description)"
VALUE_WIDTH = 44

INTRO = """\
trainer-run trains a model on NumPy (or CuPy) arrays from a Hydra config: each config group
below is one choice (optimizer=sgd) and every field can be overridden (optimizer.wd=1e-4).
"""
USAGE = ("trainer-run [group=option ...] [group.field=value ...] [-m] [--config-dir DIR] "
         "[--hosts FILE]")
GUIDE = (
    ("Outputs", "runs/<date>/<time>/: .hydra/config.yaml (what ran), metrics.jsonl, summary.json, "
                "model.npz, checkpoints/iter_<N>/; hydra.run.dir=DIR names another folder."),
    ("Resume", "trainer-run resume=runs/<date>/<time> [trainer.max_iterations=5000] continues a "
               "run bit for bit from its latest checkpoint."),
    ("Sweep", "trainer-run -m optimizer=adam,sgd optimizer.learning_rate=0.1,0.01 runs the 4 "
              "combinations in runs/multirun/<date>/<time>/<job> and ranks them (results.csv); "
              "trainer-run -m hparams_search=optuna searches with Optuna."),
    ("Processes", "mpiexec -n 4 trainer-run kvstore=dist_sync trains on 4 processes; "
                  "trainer-run --hosts FILE kvstore=dist_sync on the hosts of FILE (host:N per "
                  "line), after checking each can be reached."),
    ("Your code", "+model._target_=my_models.Net builds your class (also dataset, optimizer, "
                  "scheduler); --config-dir DIR adds your option files DIR/<group>/<option>.yaml "
                  "(DIR/experiment/<name>.yaml: experiment=<name>)."),
    ("More", "README.md (Everyday use, Config reference, Your data, Your model, Sweeps, On a "
             "cluster); "
             "trainer-run <group>=<option> --help shows an option's fields; --hydra-help is "
             "Hydra's help, --cfg job prints the composed config."),
)


def show(argv: list[str]) -> None:
    """Prints the help ``argv`` asks for: each ``group=option`` it names (a sweep's ``a,b``
    names several), else the overview. Unknown options are the caller's to refuse."""
    console = Console(width=min(shutil.get_terminal_size((WIDTH, 24)).columns, WIDTH),
                      highlight=False, markup=False, emoji=False)
    folders = args.config_dirs(argv)
    chosen = [(args.key(a), choice.strip("'\"")) for a in argv
              if "=" in a and args.key(a) in GROUPS for choice in a.split("=", 1)[1].split(",")]
    with console.capture() as captured:
        if not chosen:
            overview(console, folders)
        for group, option in chosen:
            option_help(console, group, option, folders)
    sys.stdout.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


# -- the overview -------------------------------------------------------------------------------
def overview(console: Console, folders: list[Path]) -> None:
    console.print(INTRO + f"\nUsage: {USAGE}\n")
    console.print(_grid([(Text(head, style="bold"), text) for head, text in GUIDE]))
    console.print("\nConfig groups (* marks the default choice):")
    for group in GROUPS:
        console.print()
        console.print(Text.assemble((group, "bold"), f"  {_choose(group)}"))
        default = default_choice(group)
        rows = [(f"{option} *" if option == default else option, description(path))
                for option, path in options(group, folders).items()]
        console.print(_grid(rows, indent=2))
    console.print(Text.assemble("\n", ("Top-level keys", "bold")))
    keys = _flat(top_level())
    for group in GROUPS:  # a group chosen as a list (logger) shows its choice, not {}
        if group in keys and isinstance(default_choice(group), list):
            keys[group] = default_choice(group)
    console.print(_fields(keys, [ROOT]))


def _choose(group: str) -> str:
    if group in PRESETS:
        default = default_choice(group) or "none"
        return f"a preset ({default} by default) setting other groups: trainer-run {group}=<option> --help"
    return f"{group}=<option>; its fields: trainer-run {group}=<option> --help"


def options(group: str, folders: list[Path]) -> dict[str, Path]:
    """The options of ``group`` by name with their files, ours and those of ``folders``."""
    files = {option: CONFIGS / group / f"{option}.yaml" for option in OPTIONS[group]}
    for folder in reversed(folders):
        files.update({p.stem: p for p in sorted((folder / group).glob("*.yaml"))})
    return dict(sorted(files.items()))


# -- one option ---------------------------------------------------------------------------------
def option_help(console: Console, group: str, option: str, folders: list[Path]) -> None:
    path = options(group, folders)[option]
    console.print(Text(f"{group}={option}", style="bold"))
    console.print(_grid([("", description(path))]))
    console.print(Text(f"  file: {path}"), soft_wrap=True)  # a path stays whole, however long
    if is_global(path):
        tree = read(path)
        choices = [e for e in tree.pop("defaults", []) if isinstance(e, dict)]
        for entry in choices:
            for key, value in entry.items():
                console.print(f"  chooses {key.removeprefix('override ').lstrip('/')}={value}")
        fields = _flat(tree)
    else:
        console.print(f"  override a field with {group}.<field>=<value>")
        section = option_section(group, option, path)
        own = [key for key in read(path) if key in section]  # then the shared ones
        fields = _flat({key: section[key] for key in [*own, *section]})
    console.print(_fields(fields, sources(path)))
    console.print()


def _fields(fields: dict, files: list[Path]) -> Table:
    """``fields`` (dotted name: value) with the description ``files`` give each, or the note
    on the mapping that holds it, once."""
    notes: dict[str, str] = {}
    for source in reversed(files):
        notes.update(comments(source))
    notes.setdefault("_target_", "the callable that builds it (yours: module.name)")
    rows, told = [], set()
    for key, value in fields.items():
        parents = [".".join(key.split(".")[:i]) for i in range(key.count(".") + 1, 0, -1)]
        said = next((p for p in parents if p in notes), None)  # a mapping's note: its first key
        rows.append((key, _value(value), notes[said] if said and said not in told else ""))
        told.add(said)
    return _grid(rows, indent=2)


def sources(path: Path) -> list[Path]:
    """``path`` and the files its defaults list draws keys from, nearest first."""
    found = [path]
    for entry in (read(path).get("defaults") or []):
        if isinstance(entry, str) and entry.startswith("/_"):
            found.append(CONFIGS / f"{entry[1:].split('@')[0]}.yaml")
        elif isinstance(entry, str) and entry != "_self_":
            sibling = path.parent / f"{entry}.yaml"
            found += sources(sibling if sibling.exists() else CONFIGS / path.parent.name / sibling.name)
    return found


# -- reading the files --------------------------------------------------------------------------
def description(path: Path) -> str:
    """The first sentence of the comment block that opens ``path`` (up to an empty or an
    indented comment line, such as an example command)."""
    paragraph = []
    for line in (line[1:] for line in opening_comments(path) if "@package" not in line):
        if not line.strip() or line.startswith("  "):
            break
        paragraph.append(line.strip())
    text = " ".join(paragraph)
    return re.split(r"(?<=[^.]\.)\s+(?=[A-Z])", text)[0].rstrip(":") or NO_DESCRIPTION


KEY = re.compile(r"^(?P<indent> *)(?P<key>[\w.]+):(?P<value>[^#]*?)\s*(?:#\s*(?P<note>.*))?$")


def comments(path: Path) -> dict[str, str]:
    """The description of each key of ``path`` by its dotted name: its line's comment (with
    the comment lines aligned under it), else the comment lines right above it (not the block
    that opens the file)."""
    found: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    above: list[str] = []
    inline = (None, -1)  # the last key with a comment on its line, and the comment's column
    block_indent = None  # inside a multi-line string (key: |) deeper than this
    for line in path.read_text().splitlines()[len(opening_comments(path)):]:
        indent = len(line) - len(line.lstrip())
        if block_indent is not None and (indent > block_indent or not line.strip()):
            continue
        block_indent = None
        if line.lstrip().startswith("#"):
            text = line.lstrip().lstrip("#").strip()
            if indent == inline[1]:
                found[inline[0]] += " " + text
            else:
                above.append(text)
            continue
        match = KEY.match(line)
        inline = (None, -1)
        if match is None:  # a list item or a blank line
            above = []
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match["key"]))
        name = ".".join(key for _, key in stack)
        if match["note"]:
            found[name], inline = match["note"], (name, line.index("#", len(match["indent"])))
        elif above:
            found[name] = " ".join(above)
        above = []
        if match["value"].strip() in ("|", ">", "|-", ">-"):
            block_indent = indent
    return found


# -- layout -------------------------------------------------------------------------------------
def _flat(tree: dict, prefix: str = "") -> dict:
    """``tree``'s leaves by dotted name (a mapping with keys is no leaf)."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _value(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{}"
    return str(value)


def _grid(rows: list[tuple], indent: int = 0) -> Table:
    """``rows`` in aligned columns, indented; the columns after the first wrap."""
    grid = Table.grid(padding=(0, 2, 0, 0))
    grid.add_column(no_wrap=True)
    for i in range(len(rows[0]) - 1 if rows else 0):
        grid.add_column(overflow="fold", max_width=VALUE_WIDTH if i < len(rows[0]) - 2 else None)
    for first, *rest in rows:
        grid.add_row(Text(" " * indent) + _text(first), *map(_text, rest))
    return grid


def _text(cell) -> Text:
    return cell if isinstance(cell, Text) else Text(cell)
