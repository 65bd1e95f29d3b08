"""trainer_run.console: what goes to stdout and what to stderr, the user's text shown as given
(no markup, no emoji codes replaced), the model's table, and the one line of an error (Hydra's,
OmegaConf's, the disk's) with its exit status."""

from __future__ import annotations

import errno
import signal
import subprocess
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.plugins import Plugins
from omegaconf import OmegaConf

from trainer_run import console, user_code
from trainer_run.errors import StorageError

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


@pytest.fixture(autouse=True)
def plain_terminal(monkeypatch):
    """Output as a pipe gets it (no colour codes forced on) and wide enough for one line each."""
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "200")


def test_say_prints_one_line_on_stdout_only(capsys):
    console.say("run directory: /tmp/run")
    assert capsys.readouterr() == ("run directory: /tmp/run\n", "")


def test_warn_prints_a_warning_line_on_stderr_only(capsys):
    console.warn("the run directory is not empty")
    assert capsys.readouterr() == ("", "warning: the run directory is not empty\n")


def test_inform_sends_labelled_lines_to_stderr_and_the_others_to_stdout(capsys):
    console.inform("data: 1000 examples\nhint: try optimizer=adam\nnote: resumed at 40\n"
                   "warning: the rate is high\nmodel: mlp")
    out, err = capsys.readouterr()
    assert out == "data: 1000 examples\nmodel: mlp\n"
    assert err == "hint: try optimizer=adam\nnote: resumed at 40\nwarning: the rate is high\n"


@pytest.mark.parametrize("line", ["error: not a label of ours", "hint:no space after the colon",
                                  "hint: ", "Hint: capitalised"])
def test_inform_prints_a_line_without_one_of_its_labels_as_it_is_on_stdout(capsys, line):
    console.inform(line)
    assert capsys.readouterr() == (line + "\n", "")


@pytest.mark.parametrize("text", ["[bold]not bold[/bold]", "max_time='00:-1:00:00'", ":smile: [red]",
                                  "a\\[b] \\ c", "http://example.com/[x]"])
def test_the_users_text_is_shown_as_given(capsys, text):
    """No rich markup is read in it and no emoji code (``:-1:``, ``:smile:``) replaced."""
    console.say(text)
    console.warn(text)
    console.inform(f"hint: {text}\n{text}")
    out, err = capsys.readouterr()
    assert out == f"{text}\n{text}\n"
    assert err == f"warning: {text}\nhint: {text}\n"


def test_a_long_line_is_not_wrapped(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    line = "resume with: trainer-run resume=" + "/very/long/path" * 10
    console.say(line)
    console.warn(line)
    assert capsys.readouterr() == (line + "\n", f"warning: {line}\n")


def table_rows(out: str) -> list[list[str]]:
    """The cells of each non-empty line of a table printed without borders."""
    return [line.split() for line in out.splitlines() if line.strip()]


def test_show_model_prints_each_layer_and_the_total_on_stdout(capsys):
    # an MLP 784-100-10: 784*100+100 and 100*10+10 parameters, float32
    console.show_model({"class": "MLP", "layers": {"fc1": 78_500, "fc2": 1_010},
                        "parameters": 79_510, "bytes": 79_510 * 4})
    out, err = capsys.readouterr()
    assert err == ""
    assert table_rows(out) == [["model:", "MLP"], ["layer", "parameters"], ["fc1", "78,500"],
                               ["fc2", "1,010"], ["total", "79,510", "(310.6", "KiB)"]]


@pytest.mark.parametrize("nbytes, size", [(0, "0 bytes"), (1023, "1,023 bytes"), (1024, "1.0 KiB"),
                                          (1536, "1.5 KiB"), (5 * 2**20, "5.0 MiB"),
                                          (3 * 2**30, "3,072.0 MiB")])
def test_show_model_gives_the_size_in_bytes_kib_or_mib(capsys, nbytes, size):
    console.show_model({"class": "M", "layers": {}, "parameters": 12, "bytes": nbytes})
    assert table_rows(capsys.readouterr().out)[-1] == ["total", "12", *f"({size})".split()]


def test_show_model_gives_each_layers_training_note_and_the_values_trained(capsys):
    console.show_model({"class": "CNN", "layers": {"conv1": 832, "fc1": 1_000, "fc2": 20},
                        "parameters": 1_852, "bytes": 1_852 * 4, "trained": 1_020,
                        "frozen": ["conv1/W", "conv1/b"], "lr_mult": {"fc2/W": 10.0},
                        "training": {"conv1": "frozen", "fc2": "W lr_mult=10"}})
    assert table_rows(capsys.readouterr().out) == [
        ["model:", "CNN"], ["layer", "parameters", "training"], ["conv1", "832", "frozen"],
        ["fc1", "1,000"], ["fc2", "20", "W", "lr_mult=10"], ["total", "1,852", "(7.2", "KiB)", "1,020",
                                                            "trained"]]


def test_show_model_shows_layer_and_class_names_as_given(capsys):
    console.show_model({"class": "my.Net[bold]", "layers": {"blocks.0[red]": 3}, "parameters": 3,
                        "bytes": 12})
    rows = table_rows(capsys.readouterr().out)
    assert rows[0] == ["model:", "my.Net[bold]"] and rows[2] == ["blocks.0[red]", "3"]


def test_describe_says_where_the_config_does_not_resolve():
    config = OmegaConf.create({"trainer": {"lr": "${optimizer.rate}"}})
    with pytest.raises(Exception) as raised:
        OmegaConf.to_container(config, resolve=True)
    assert console.describe(raised.value) == (
        "the config does not resolve: Interpolation key 'optimizer.rate' not found (at trainer.lr)")


def test_describe_of_an_omegaconf_error_without_a_key_has_no_place():
    from omegaconf.errors import OmegaConfBaseException

    assert console.describe(OmegaConfBaseException("bad\nmore")) == "the config does not resolve: bad"


def hydra_error(monkeypatch, override: str, group: str | None = None, name: str | None = None):
    """What Hydra raises composing the config with ``override``, where the config ``name`` of
    ``hydra/<group>`` is not installed (its plugin's registration taken out of the config store)."""
    Plugins.instance()  # the plugins register their configs when first scanned
    if group is not None:
        monkeypatch.delitem(ConfigStore.instance().repo["hydra"][group], f"{name}.yaml")
    with initialize_config_dir(config_dir=str(CONFIGS), version_base=None):
        with pytest.raises(Exception) as raised:
            compose("config", overrides=[override], return_hydra_config=True)
    return raised.value


@pytest.mark.parametrize("group, name, line", [
    ("sweeper", "optuna",
     'hydra/sweeper=optuna needs hydra-optuna-sweeper: pip install "trainer-run[sweep]"'),
    ("launcher", "joblib",
     'hydra/launcher=joblib needs hydra-joblib-launcher: pip install "trainer-run[sweep]"'),
    ("launcher", "submitit_slurm",
     'hydra/launcher=submitit_slurm needs hydra-submitit-launcher: pip install "trainer-run[slurm]"')])
def test_describe_of_a_missing_hydra_plugin_is_the_pip_line(monkeypatch, group, name, line):
    assert console.describe(hydra_error(monkeypatch, f"hydra/{group}={name}", group, name)) == line


def test_describe_of_an_unknown_hydra_option_is_hydras_words_on_one_line(monkeypatch):
    line = console.describe(hydra_error(monkeypatch, "hydra/launcher=ray"))
    assert line.startswith("In 'hydra/config': Could not find 'hydra/launcher/ray'; "
                           "Available options in 'hydra/launcher':; basic; joblib; ")
    assert "\n" not in line and "pip install" not in line


def test_describe_of_another_error_joins_its_lines_or_names_its_type():
    assert console.describe(ValueError("first\n\n  second  \n")) == "first; second"
    assert console.describe(KeyError()) == "KeyError"


def test_last_said_is_the_last_line_on_stderr_or_the_exit_status():
    said = subprocess.CompletedProcess(["x"], 2, stdout="out\n", stderr="one\nerror: two\n\n")
    assert console.last_said(said) == "error: two"
    assert console.last_said(subprocess.CompletedProcess(["x"], -9, stderr="")) == "exit status -9"


def test_cannot_write_names_the_file_and_the_reason():
    error = OSError(errno.ENOSPC, "No space left on device", "/runs/a/model.npz")
    assert console.cannot_write(error) == ("cannot write /runs/a/model.npz: No space left on device; "
                                           "free some space or choose a writable hydra.run.dir")
    assert console.cannot_write(OSError("disk gone")) == (
        "cannot write the run directory: disk gone; free some space or choose a writable hydra.run.dir")
    assert console.cannot_write(StorageError("could not write log.jsonl: disk full")) == (
        "could not write log.jsonl: disk full; free some space or choose a writable hydra.run.dir")


def test_failed_file_in_the_run_directory_is_a_write_the_disk_refused(tmp_path):
    out = tmp_path / "run"
    for path in (out, out / "model.npz", out / "checkpoints" / "iter_10"):
        error = PermissionError(errno.EACCES, "Permission denied", str(path))
        assert console.failed_file(error, out) == (
            f"cannot write {path}: Permission denied; free some space or choose a writable "
            "hydra.run.dir", 4)
    assert console.failed_file(StorageError("full"), out) == (
        "full; free some space or choose a writable hydra.run.dir", 4)


def test_failed_file_named_relative_to_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    error = OSError(errno.EROFS, "Read-only file system", "run/summary.json")
    assert console.failed_file(error, Path("run"))[1] == 4
    assert console.failed_file(error, tmp_path / "run")[1] == 4


def test_failed_file_elsewhere_is_a_file_the_run_reads(tmp_path):
    out = tmp_path / "run"
    for path in (tmp_path / "train.csv", tmp_path / "run2" / "x", tmp_path):
        error = FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))
        assert console.failed_file(error, out) == (
            f"cannot read {path}: No such file or directory", 2)
    assert console.failed_file(OSError("bad descriptor"), out) == (
        "cannot read a file the run needs: bad descriptor", 2)


def test_show_cause_prints_the_users_frames_only(capsys):
    def users_callback():
        raise ValueError("boom")

    def raise_through_trainer_run():
        with user_code.blame("callbacks.mine", users_callback):
            users_callback()

    with pytest.raises(Exception) as raised:
        raise_through_trainer_run()
    console.show_cause(raised.value)
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("Traceback (most recent call last):\n")
    assert err.endswith("ValueError: boom\n")
    assert "in users_callback" in err and "raise ValueError" in err
    assert "user_code.py" not in err and "contextlib" not in err


def test_show_cause_of_an_error_without_a_cause_prints_nothing(capsys):
    console.show_cause(ValueError("no cause"))
    assert capsys.readouterr() == ("", "")


def test_late_signal_warns_of_a_signal_after_the_last_iteration(capsys, monkeypatch):
    monkeypatch.setattr(console.stop_signals, "requested", lambda: signal.SIGTERM)
    console.late_signal("completed")
    assert capsys.readouterr() == ("", "warning: SIGTERM came while the run was writing its last "
                                   "files; they are complete and so is the run, nothing was cut short\n")
    console.late_signal("interrupted")
    assert capsys.readouterr() == ("", "")
    monkeypatch.setattr(console.stop_signals, "requested", lambda: None)
    console.late_signal("completed")
    assert capsys.readouterr() == ("", "")
