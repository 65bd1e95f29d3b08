"""trainer-eval's evaluation as a library (runner/evaluation.py): :func:`evaluate` gives the
record of the chosen weights and writes nothing itself (that it is the record the command writes:
tests/command/test_after_training.py); :func:`write` gives each record a name of
its own and its exact bytes; bad overrides are refused in the command's words before anything
is read."""

from __future__ import annotations

import contextlib
import datetime
import io

import pytest
from run_folders import QUICK

import trainer_run
from trainer_run.errors import ConfigError
from trainer_run.runner import evaluation
from trainer_run.storage import strict_json


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run of 6 iterations, trained in this process, and the folder of its owner's key."""
    folder = tmp_path_factory.mktemp("evaluation")
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(io.StringIO()):
        patch.setenv("XDG_CONFIG_HOME", str(folder / "keys"))
        trainer_run.train(list(QUICK), run_dir=folder / "run")
    return folder / "run", folder / "keys"


def test_the_library_evaluates_the_chosen_weights_and_writes_nothing(trained, monkeypatch):
    run, keys = trained
    monkeypatch.setenv("XDG_CONFIG_HOME", str(keys))
    result = evaluation.evaluate(run, ["split=val", "checkpoint=last"])
    assert result["checkpoint"]["iteration"] == 6 and result["split"] == "val"
    assert result["examples"] == 40 and set(result["metrics"]) == {"val/loss", "val/accuracy"}
    assert not (run / "eval").exists()
    with pytest.raises(ConfigError) as refused:
        evaluation.evaluate(run, ["dataset=nope"])
    assert str(refused.value).startswith("dataset=nope is not available; choose one of ")
    assert not (run / "eval").exists()


class Now(datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(2026, 12, 7, 15, 0, 0, 123456)


def test_records_written_in_one_microsecond_each_get_their_own_name_and_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(evaluation, "datetime", Now)
    first = {"run": str(tmp_path), "split": "test", "metrics": {"test/loss": 0.25}}
    second = {**first, "metrics": {"test/loss": 0.5}}
    paths = [evaluation.write(tmp_path, first), evaluation.write(tmp_path, second)]
    assert [p.name for p in paths] == ["2026-12-07_15-00-00_123456.json",
                                       "2026-12-07_15-00-00_123456_2.json"]
    assert [p.read_text() for p in paths] == [strict_json.dumps(first, indent=2),
                                              strict_json.dumps(second, indent=2)]
    assert sorted(p.name for p in (tmp_path / "eval").iterdir()) == [p.name for p in paths]


@pytest.mark.parametrize("overrides, message", [
    (["split="], "split= is empty; give split=test, val, train, all (left out: test)"),
    (["split=dev"], "split=dev is unknown; choose one of test, val, train, all"),
    (["epochs=3"], "'epochs=3' is not a KEY=VALUE this command takes; give checkpoint=, split=, "
                   "trust=, dataset= or dataset.<key>="),
    (["trust=maybe"], "trust must be true or false, got 'maybe'"),
])
def test_bad_overrides_are_refused_in_the_commands_words_before_the_run_is_read(
        tmp_path, overrides, message):
    with pytest.raises(ConfigError) as refused:
        evaluation.evaluate(tmp_path / "no run", overrides)
    assert str(refused.value) == message
    assert list(tmp_path.iterdir()) == []
