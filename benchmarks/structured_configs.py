"""Issue 39's question: would Hydra structured configs (a dataclass per group option,
registered in the ConfigStore, each YAML option extending its dataclass) cost more than 50 ms
of start-up?

The script builds that design for every option of ours, from the options as composed today
(:func:`trainer_run.compose.options.option_section`): one dataclass per option, its fields
typed by their defaults (``Optional`` where the default is null, ``Any`` for lists, mappings
and interpolations), registered as ``<group>/<option>_schema``; and a copy of ``configs/``
whose every option lists its schema first in its defaults. Then, in fresh processes,
alternating (the machine may be shared), it times what a run pays before its first line of
work: importing Hydra, (registering the dataclasses,) and composing the default config, and
a config that picks other options (``optimizer=sgd scheduler=cosine dataset=blobs``). Hydra
composes twice per run (once for ``hydra.mode``, once for the job), so the compose is timed
twice per process, as the command pays it.

    python benchmarks/structured_configs.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import keyword
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from trainer_run.compose.options import CONFIGS, GROUPS, OPTIONS, PRESETS, is_global, option_section

LIMIT_S = 0.050
COUNT = [0]  # the dataclasses written
NESTED = ("logger", "callbacks")
"""Groups whose options each add one entry under the group's key (``logger.csv``): a list of
choices, not one section, so they keep their YAML here."""
OVERRIDES = [[], ["optimizer=sgd", "scheduler=cosine", "dataset=blobs"]]
RUN = """
import sys, time
start = time.perf_counter()
sys.path.insert(0, {folder!r})
from hydra import compose, initialize_config_dir
{register}
with initialize_config_dir(config_dir={configs!r}, version_base="1.3", job_name="trainer-run"):
    for overrides in {overrides!r}:
        compose("config", overrides=overrides, return_hydra_config=True)
        compose("config", overrides=overrides, return_hydra_config=True)
print(time.perf_counter() - start)
"""


def field_line(key: str, value) -> str | None:
    """One dataclass field for ``key: value`` (None for a key that is no identifier)."""
    if not key.isidentifier() or keyword.iskeyword(key):
        return None
    if isinstance(value, str) and "${" in value or isinstance(value, (list, dict)):
        return f"    {key}: Any = field(default_factory=lambda: {value!r})"
    if value is None:
        return f"    {key}: Any = None"
    kind = type(value).__name__
    return f"    {key}: Optional[{kind}] = {value!r}"


def schemas(folder: Path) -> None:
    """Writes ``folder/our_schemas.py`` (the dataclasses, registered on import) and
    ``folder/configs`` (our configs, each option extending its schema)."""
    lines = ["from dataclasses import dataclass, field", "from typing import Any, Optional",
             "from hydra.core.config_store import ConfigStore", "cs = ConfigStore.instance()"]
    shutil.copytree(CONFIGS, folder / "configs")
    for group in GROUPS:
        if group in PRESETS or group in NESTED:
            continue
        for option in OPTIONS[group]:
            path = folder / "configs" / group / f"{option}.yaml"
            if is_global(path):
                continue
            name = re.sub(r"\W", "_", f"{group}_{option}").title().replace("_", "")
            fields = [f for k, v in option_section(group, option).items()
                      if (f := field_line(k, v)) is not None]
            COUNT[0] += 1
            lines += ["", "@dataclass", f"class {name}:", *(fields or ["    pass"]),
                      f"cs.store(group={group!r}, name={option + '_schema'!r}, node={name})"]
            extend(path, f"{option}_schema")
    (folder / "our_schemas.py").write_text("\n".join(lines) + "\n")


def extend(path: Path, schema: str) -> None:
    """Makes the option file ``path`` list ``schema`` first in its defaults."""
    text = path.read_text()
    if re.search(r"^defaults:", text, re.M):
        text = re.sub(r"^defaults:\n", f"defaults:\n  - {schema}\n", text, count=1, flags=re.M)
    else:
        text = f"defaults:\n  - {schema}\n  - _self_\n" + text
    path.write_text(text)


SAME = """
import json, sys
sys.path.insert(0, {folder!r})
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
{register}
with initialize_config_dir(config_dir={configs!r}, version_base="1.3", job_name="trainer-run"):
    print(json.dumps([OmegaConf.to_container(compose("config", overrides=o)) for o in {overrides!r}],
                     sort_keys=True))
"""


def composed(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(done.stderr.strip().splitlines()[-1])
    return done.stdout


def timed(code: str) -> float:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(done.stderr.strip().splitlines()[-1])
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        schemas(folder)
        today = RUN.format(folder=tmp, register="", configs=str(CONFIGS), overrides=OVERRIDES)
        structured = RUN.format(folder=tmp, register="import our_schemas",
                                configs=str(folder / "configs"), overrides=OVERRIDES)
        timed(today), timed(structured)  # bytecode caches
        same = composed(SAME.format(folder=tmp, register="", configs=str(CONFIGS),
                                    overrides=OVERRIDES)) == \
            composed(SAME.format(folder=tmp, register="import our_schemas",
                                 configs=str(folder / "configs"), overrides=OVERRIDES))
        rows = {"today": [], "structured": []}
        for _ in range(args.rounds):
            rows["today"].append(timed(today))
            rows["structured"].append(timed(structured))
    med = {k: statistics.median(v) for k, v in rows.items()}
    count = COUNT[0]
    print(f"the two designs compose the same configs: {'yes' if same else 'NO'}")
    print(f"medians of {args.rounds} rounds: import Hydra, register, compose 2 configs twice each")
    print(f"{'today: YAML options, schema.py types':<52}{med['today']:>8.3f} s")
    print(f"{f'structured: {count} option dataclasses':<52}{med['structured']:>8.3f} s")
    extra = med["structured"] - med["today"]
    print(textwrap.dedent(f"""\
        cost of the design: {extra * 1e3:+.0f} ms per run (limit +{LIMIT_S * 1e3:.0f} ms): """
                          f"""{'within' if extra <= LIMIT_S else 'over'} the limit"""))


if __name__ == "__main__":
    main()
