"""``trainer-run --help`` and ``trainer-run <group>=<option> --help``: every group and option
with the description its file opens with, an option's fields with their values and comments;
and the convention it reads: every option file opens with a description, every optimizer
field has a comment."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from helpers import run_cli
from omegaconf import OmegaConf

from trainer_run import optimizers
from trainer_run.compose.options import CONFIGS, GROUPS, OPTIONS, default_choice, option_section


def _squeezed(text: str) -> str:
    """``text`` with every run of whitespace made one space (wrapped lines joined)."""
    return " ".join(text.split())


def _first_comment(path: Path) -> str:
    """The text of the first comment line of ``path`` that is no ``# @package`` line."""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            return ""
        if "@package" not in line:
            return line.lstrip("#").strip()
    return ""


def _inline_comment(path: Path, key: str) -> str | None:
    """The comment on the line of top-level ``key`` in ``path``."""
    for line in path.read_text().splitlines():
        if line.startswith(f"{key}:") and "#" in line:
            return line.split("#", 1)[1].strip()
    return None


# -- the convention -----------------------------------------------------------------------------
@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*/*.yaml")), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_option_file_opens_with_a_one_line_description(path):
    assert len(_first_comment(path)) >= 10, f"{path} lacks its one-line description comment"


@pytest.mark.parametrize("option", OPTIONS["optimizer"])
def test_every_optimizer_field_has_a_comment(option):
    path = CONFIGS / "optimizer" / f"{option}.yaml"
    for key in option_section("optimizer", option):
        if key != "_target_":
            note = _inline_comment(path, key) or _inline_comment(CONFIGS / "_optimizer.yaml", key)
            assert note, f"optimizer={option}: field {key} has no comment"


def test_the_debugging_optimizer_says_so():
    assert _first_comment(CONFIGS / "optimizer" / "test.yaml").startswith(
        "MXNet's debugging optimizer, not for training")
    readme = (Path(__file__).parent.parent.parent / "README.md").read_text()
    assert "`test` is MXNet's debugging optimizer" in readme


# -- the overview -------------------------------------------------------------------------------
def test_help_names_every_group_and_option_with_its_description():
    for flag in ("--help", "-h"):
        result = run_cli(flag)
        assert result.returncode == 0, result.stderr
        out = result.stdout
        assert "runs/<date>/<time>" in out and "resume=" in out and "-m " in out
        assert "_target_" in out and "--config-dir" in out and "README" in out
        assert "--hosts FILE" in out and "mpiexec -n 4" in out
        flat = _squeezed(out)
        for group in GROUPS:
            assert re.search(rf"^{group}  ", out, re.M), f"group {group} missing"
            for option in OPTIONS[group]:
                mark = " *" if option == default_choice(group) else ""
                first = _first_comment(CONFIGS / group / f"{option}.yaml").split(". ")[0]
                assert f" {option}{mark} {first}" in flat, f"{group}={option}: {first!r}"
    assert " test MXNet's debugging optimizer, not for training" in flat
    assert " seed 0 Seed of every random draw" in flat  # the top-level keys, from config.yaml


def test_piped_help_has_no_escape_codes_and_fits_100_columns():
    for argv in (["--help"], ["dataset=mnist", "optimizer=adam", "--help"]):
        out = run_cli(*argv).stdout
        assert "\x1b" not in out
        # every line but an option's file path (kept whole, as long as the install's path)
        assert max(len(line) for line in out.splitlines() if not line.startswith("  file: ")) <= 100
        assert all(line == line.rstrip() for line in out.splitlines())


def test_help_lists_the_options_of_a_config_dir(tmp_path):
    (tmp_path / "optimizer").mkdir()
    (tmp_path / "model").mkdir()
    (tmp_path / "optimizer" / "mine.yaml").write_text(
        "# My own SGD. More text here.\ndefaults:\n  - /_optimizer@_here_\n  - _self_\n"
        "_target_: trainer_run.optimizers.SGD\nmomentum: 0.5   # how much of the last step stays\n")
    (tmp_path / "model" / "bare.yaml").write_text("_target_: trainer_run.models.MLP\n")
    flat = _squeezed(run_cli("--config-dir", tmp_path, "--help").stdout)
    assert " mine My own SGD. " in flat and "More text here" not in flat  # its first sentence
    assert " bare (no description) " in flat
    result = run_cli("--config-dir", tmp_path, "optimizer=mine", "--help")
    flat = _squeezed(result.stdout)
    assert result.returncode == 0, result.stderr
    assert " momentum 0.5 how much of the last step stays " in flat
    wd_note = _inline_comment(CONFIGS / "_optimizer.yaml", "wd")
    assert f" wd 0.0 {wd_note} " in flat  # the shared keys with their comments


def test_an_option_file_that_does_not_parse_is_one_line_error(tmp_path):
    (tmp_path / "optimizer").mkdir()
    (tmp_path / "optimizer" / "broken.yaml").write_text("# Broken.\nmomentum: [0.5,\n")
    result = run_cli("--config-dir", tmp_path, "optimizer=broken", "--help")
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "broken.yaml" in lines[0]


# -- one option ---------------------------------------------------------------------------------
MXNET_ADAM = {"learning_rate": 0.001, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-08}
"""``mxnet.optimizer.Adam``'s defaults in MXNet 1.9.1."""


def test_option_help_shows_the_fields_values_and_descriptions():
    result = run_cli("optimizer=adam", "--help")
    assert result.returncode == 0, result.stderr
    rows = {m[1]: (m[2], m[3]) for m in re.finditer(r"^  (\w+) {2,}(\S+)(?: {2,}(.*))?$",
                                                    result.stdout, re.M)}
    signature = inspect.signature(optimizers.Adam.__init__).parameters
    flat = _squeezed(result.stdout)
    for key, mxnet in MXNET_ADAM.items():
        assert float(rows[key][0]) == mxnet == signature[key].default
        note = (_inline_comment(CONFIGS / "optimizer" / "adam.yaml", key)
                or _inline_comment(CONFIGS / "_optimizer.yaml", key))
        assert f" {key} {rows[key][0]} {note}" in flat
    assert rows["_target_"][0] == "trainer_run.optimizers.Adam"
    assert set(rows) == set(option_section("optimizer", "adam"))


def test_several_options_each_get_their_fields():
    out = run_cli("optimizer=sgd,rmsprop", "scheduler=cosine", "--help").stdout
    for head in ("optimizer=sgd", "optimizer=rmsprop", "scheduler=cosine"):
        assert re.search(rf"^{head}$", out, re.M), head
        assert f"  file: {CONFIGS / head.replace('=', '/')}.yaml\n" in out
    assert re.search(r"^  centered +false ", out, re.M)  # rmsprop's
    assert re.search(r"^  final_lr +0.0$", out, re.M)     # cosine's


def test_a_preset_shows_what_it_chooses_and_sets():
    out = run_cli("experiment=spirals_mlp_sgd", "--help").stdout
    tree = OmegaConf.load(CONFIGS / "experiment" / "spirals_mlp_sgd.yaml")
    for entry in tree.defaults:
        (key, value), = entry.items()
        assert f"chooses {key.split('/')[-1]}={value}" in out
    assert re.search(rf"^  optimizer.learning_rate +{tree.optimizer.learning_rate}$", out, re.M)


def test_the_runners_own_groups_show_their_target_and_precision_what_it_sets():
    flat = _squeezed(run_cli("--help").stdout)
    assert "precision a preset (fp32 by default) setting other groups" in flat
    out = run_cli("updater=parallel", "precision=fp16", "loss_scale=none", "--help").stdout
    flat = _squeezed(out)
    assert re.search(r"^  _target_ +trainer_run\.updaters\.", out, re.M)  # the class, folded
    assert " devices 2 number of replicas" in flat and " accum_grad 1 " in flat
    assert "chooses loss_scale=dynamic" in out
    assert " backend.dtype float16 " in flat and " optimizer.multi_precision true " in flat
    assert " _target_ null null builds no scaler" in flat


def test_unknown_option_help_is_one_line_error():
    result = run_cli("optimizer=nosuch", "--help")
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: optimizer=nosuch is not available")
    assert "adam" in lines[0]


def test_hydras_own_help_and_cfg_still_work():
    hydra_help = run_cli("--hydra-help")
    assert hydra_help.returncode == 0 and "Hydra (" in hydra_help.stdout
    cfg = run_cli("--cfg", "job", "optimizer=sgd")
    assert cfg.returncode == 0, cfg.stderr
    assert OmegaConf.create(cfg.stdout).optimizer._target_ == "trainer_run.optimizers.SGD"


def test_the_top_level_logger_shows_the_loggers_chosen_by_default():
    result = run_cli("--help")
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("  logger "))
    assert line.split()[1:3] == ["[jsonl,", "csv]"], line
    assert default_choice("logger") == ["jsonl", "csv"]
