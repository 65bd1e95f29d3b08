"""After training, as a user's own model and a careful user meet it (issue 36 items 9, 12, 14):
``trainer-eval`` and ``load_model`` import the user's model from the folder the run was trained
in as ``trainer-run`` did; ``init_from=<run>`` fine-tunes the source run's model, not the
default one; ``predict`` warns when its inputs cannot be the run's raw inputs and refuses
inputs that are not numbers."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy
import pytest
from helpers import run_cli

ONE_WORKER = True  # the module's runs are trained once (tests/conftest.py)

QUIET = ("trainer.progress=false",)
SHORT = ("trainer.max_iterations=20", *QUIET)

MY_MODELS = textwrap.dedent("""\
    from trainer_run import functions as F
    from trainer_run.models import Linear, Module

    class TwoLayer(Module):
        def __init__(self, in_size, out_size, backend, hidden=32):
            self.fc1 = Linear(in_size, hidden, backend)
            self.fc2 = Linear(hidden, out_size, backend)

        def forward(self, x):
            return self.fc2(F.tanh(self.fc1(x)))

        def __call__(self, x, t):
            y = self.forward(x)
            return {"loss": F.softmax_cross_entropy(y, t), "accuracy": F.accuracy(y, t)}
    """)


def _script(name: str) -> str:
    """The console script ``name`` of this environment: started as the user starts it, so that
    nothing (``python -m``, ``python -c``) puts the current folder on the import path for it."""
    script = Path(sys.executable).parent / name
    assert script.exists()
    return str(script)


@pytest.fixture(scope="module")
def own_model(tmp_path_factory) -> Path:
    """A folder holding my_models.py and a run of its TwoLayer, trained from that folder as the
    README's "Your model" says, with best and last weights the same (one evaluation)."""
    folder = tmp_path_factory.mktemp("own").resolve()
    (folder / "my_models.py").write_text(MY_MODELS)
    result = subprocess.run([_script("trainer-run"), "+model._target_=my_models.TwoLayer",
                             "+model.hidden=16", *SHORT, "hydra.run.dir=run"], cwd=folder,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return folder


@pytest.mark.parametrize("split, checkpoint", [("val", "best"), ("val", "last")])
def test_trainer_eval_imports_the_users_model_from_the_folder_it_was_trained_in(
        own_model, split, checkpoint):
    result = subprocess.run([_script("trainer-eval"), "run", f"split={split}",
                             f"checkpoint={checkpoint}"], cwd=own_model, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    written = Path(own_model / result.stdout.split("written: ")[1].strip())
    metrics = json.loads(written.read_text())["metrics"]
    summary = json.loads((own_model / "run" / "summary.json").read_text())
    assert metrics["val/accuracy"] == pytest.approx(summary["val/accuracy"])
    assert metrics["val/loss"] == pytest.approx(summary["val/loss"], rel=1e-5)


def test_load_model_in_a_script_elsewhere_imports_the_users_model_from_the_current_folder(
        own_model, tmp_path):
    script = tmp_path / "scripts" / "predict.py"  # its own folder, not the run's, is sys.path[0]
    script.parent.mkdir()
    script.write_text("import sys, trainer_run\n"
                      "trained = trainer_run.load_model('run')\n"
                      "print(type(trained.model).__module__, trained.predict([[0.5, -0.5]]).shape)\n")
    result = subprocess.run([sys.executable, str(script)], cwd=own_model, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["my_models", "(1,", "2)"]


def test_a_model_that_cannot_be_imported_from_the_current_folder_is_still_one_line(own_model, tmp_path):
    result = subprocess.run([_script("trainer-eval"), str(own_model / "run"), "split=val"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        "error: model._target_=my_models.TwoLayer: cannot import it (No module named 'my_models'); "
        "a module of your own must be importable from the folder you run the command in"]


# -- init_from fine-tunes the source run's model (item 12) ----------------------------------------

TUNE = ("optimizer.learning_rate=0", "trainer.max_iterations=5", *QUIET)
MODELS = {"mlp": ("model=mlp", "model.hidden_sizes=[16]", "model.activation=tanh"),
          "logistic_regression": ("model=logistic_regression",)}


@pytest.fixture(scope="module")
def sources(tmp_path_factory, own_model) -> dict:
    """Runs of models other than the default, by name: two of ours and the user's TwoLayer."""
    root = tmp_path_factory.mktemp("sources")
    runs = {"TwoLayer": own_model / "run"}
    for name, chosen in MODELS.items():
        result = run_cli(*chosen, *SHORT, f"hydra.run.dir={root / name}")
        assert result.returncode == 0, result.stderr
        runs[name] = root / name
    return runs


def _model_section(run: Path) -> dict:
    import yaml

    return yaml.safe_load((run / ".hydra" / "config.yaml").read_text())["model"]


def _arrays(path: Path) -> dict:
    with numpy.load(path) as loaded:
        return {k: loaded[k] for k in loaded.files}


@pytest.mark.parametrize("name", ["mlp", "logistic_regression", "TwoLayer"])
@pytest.mark.parametrize("given", ["{run}", "{run}/model.npz", "{run}/checkpoints/iter_00000020",
                                   "{run}/checkpoints/best"])
def test_init_from_fine_tunes_the_source_runs_model(sources, own_model, tmp_path, name, given):
    run = sources[name]
    source = given.format(run=run)
    result = run_cli(f"init_from={source}", *TUNE, f"hydra.run.dir={tmp_path / 'tuned'}", cwd=own_model)
    assert result.returncode == 0, result.stderr
    section = _model_section(run)
    assert (f"init_from: model section from {run} ({section['_target_']}); name model=... to choose "
            "another") in result.stdout.splitlines()
    assert _model_section(tmp_path / "tuned") == section  # what ran, and what load_model builds
    tuned, start = _arrays(tmp_path / "tuned" / "model.npz"), _arrays(run / "model.npz")
    assert sorted(tuned) == sorted(start)
    assert all(numpy.array_equal(tuned[k], start[k]) for k in start)  # learning rate 0


def test_a_model_named_on_the_command_line_is_the_one_fine_tuned(sources, tmp_path):
    for n, named in enumerate((["model=mlp"], ["model.hidden_sizes=[16]"], ["++model.activation=relu"])):
        out = tmp_path / f"tuned_{n}"
        result = run_cli(f"init_from={sources['mlp']}", *named, *TUNE, f"hydra.run.dir={out}")
        assert "model section from" not in result.stdout
        if named == ["model.hidden_sizes=[16]"]:  # the default mlp's activation (relu), 16 wide
            assert result.returncode == 0, result.stderr
            assert _model_section(out)["activation"] == "relu"
            continue
        assert result.returncode == 2 and "the weights do not match the model" in result.stderr
        assert not out.exists()


def test_init_from_a_run_of_someone_elses_code_needs_trust(sources, own_model, tmp_path):
    import shutil

    theirs = tmp_path / "theirs"
    shutil.copytree(sources["TwoLayer"], theirs)
    (theirs / ".hydra" / "config.sig").unlink()  # not signed with this user's key
    refused = run_cli(f"init_from={theirs}", *TUNE, f"hydra.run.dir={tmp_path / 'tuned'}", cwd=own_model)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    lines = refused.stderr.splitlines()
    assert len(lines) == 1 and "my_models.TwoLayer" in lines[0] and "trust=true" in lines[0]
    assert not (tmp_path / "tuned").exists()
    trusted = run_cli(f"init_from={theirs}", "trust=true", *TUNE, f"hydra.run.dir={tmp_path / 'tuned'}",
                      cwd=own_model)
    assert trusted.returncode == 0, trusted.stderr
    assert _model_section(tmp_path / "tuned")["_target_"] == "my_models.TwoLayer"


@pytest.mark.parametrize("strict", ["true", "false"])
def test_init_from_that_matches_nothing_is_refused_strict_or_not(sources, tmp_path, strict):
    result = run_cli(f"init_from={sources['mlp']}", "model=logistic_regression",
                     f"init_from_strict={strict}", *TUNE, f"hydra.run.dir={tmp_path / 'tuned'}")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: init_from={sources['mlp']}: ")
    expected = "the weights do not match the model" if strict == "true" else "none of the weights fits"
    assert expected in lines[0] and "l1/W" in lines[0]
    assert not (tmp_path / "tuned").exists()


@pytest.mark.parametrize("bad", [numpy.nan, numpy.inf, -numpy.inf])
@pytest.mark.parametrize("strict", ["true", "false"])
def test_init_from_weights_holding_nan_or_inf_is_refused_naming_the_array(sources, tmp_path, bad, strict):
    arrays = _arrays(sources["mlp"] / "model.npz")
    arrays["l2/b"][-1] = bad
    numpy.savez(tmp_path / "bad.npz", **arrays)
    result = run_cli(f"init_from={tmp_path / 'bad.npz'}", *MODELS["mlp"], f"init_from_strict={strict}",
                     *TUNE, f"hydra.run.dir={tmp_path / 'tuned'}")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: init_from={tmp_path / 'bad.npz'}: l2/b holds NaN or infinite values: weights of a "
        "run that diverged cannot start one; give weights saved before it diverged (an earlier "
        "checkpoint, <run>/checkpoints/iter_<N>)"]
    assert not (tmp_path / "tuned").exists()


# -- predict checks its inputs against the run's raw inputs (item 14) -----------------------------

SCALED_TWICE = "these cannot be raw inputs of this run"


@pytest.fixture(scope="module")
def pixels(tmp_path_factory) -> dict:
    """Runs on the same 64 pixels per example, stored three ways: ``uint8`` (0..255,
    dataset.normalize=unit), ``whole`` (float32 0.0..255.0, standardize) and ``unit``
    (float32 in [0, 1], none); the class says which half of the pixels is brighter."""
    folder = tmp_path_factory.mktemp("pixels")
    rng = numpy.random.default_rng(0)
    x = rng.integers(0, 256, size=(1500, 64), dtype=numpy.uint8)
    y = (x[:, :32].astype(int).sum(1) > x[:, 32:].astype(int).sum(1)).astype(numpy.int64)
    stored = {"uint8": (x, "unit"), "whole": (x.astype(numpy.float32), "standardize"),
              "unit": ((x / 255).astype(numpy.float32), "none")}
    runs = {}
    for name, (inputs, normalize) in stored.items():
        numpy.savez(folder / f"{name}.npz", x=inputs, y=y)
        result = run_cli("dataset=npz", f"dataset.path={name}.npz", f"dataset.normalize={normalize}",
                         "trainer.max_iterations=300", *QUIET, f"hydra.run.dir={name}", cwd=folder)
        assert result.returncode == 0, result.stderr
        runs[name] = (folder / name, inputs, y)
    return runs


def _predicted(trained, x, **options):
    """The outputs of ``trained.predict(x)`` and the messages of the warnings it gave."""
    import warnings

    with warnings.catch_warnings(record=True) as told:
        warnings.simplefilter("always")
        out = trained.predict(x, **options)
    return out, [str(w.message) for w in told if issubclass(w.category, UserWarning)]


@pytest.mark.parametrize("name", ["uint8", "whole", "unit"])
def test_raw_inputs_predict_without_a_warning_in_any_numeric_type(pixels, name):
    import trainer_run

    run, x, y = pixels[name]
    trained = trainer_run.load_model(run)
    expected, told = _predicted(trained, x)
    assert told == [] and (expected.argmax(1) == y).mean() > 0.9
    kinds = [x.astype(numpy.float64), x.astype(numpy.float32)]
    kinds += [x.astype(numpy.int64), x.astype(numpy.int16)] if name != "unit" else []
    for given in kinds:
        out, told = _predicted(trained, given)
        assert told == [] and out.dtype == expected.dtype
        numpy.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name, scaled, why", [
    ("uint8", lambda x: x / 255,
     "with fractions; the run's raw inputs were uint8 in [0, 255], whole numbers"),
    ("uint8", lambda x: (x - 127.5) / 73.6, "with fractions; the run's raw inputs were uint8"),
    ("whole", lambda x: x / 255, "with fractions; the run's raw inputs were float32 in [0, 255]"),
    ("unit", lambda x: x * 255, "far outside the range of the run's raw inputs; the run's raw inputs "
                                "were float32 in [0, 1]"),
])
def test_inputs_scaled_already_warn_once_per_call(pixels, name, scaled, why):
    import trainer_run

    run, x, y = pixels[name]
    trained = trainer_run.load_model(run)
    for batch_size in (None, 7):  # one warning however many batches
        _, told = _predicted(trained, scaled(x), batch_size=batch_size)
        assert len(told) == 1 and SCALED_TWICE in told[0] and why in told[0], told
    _, told = _predicted(trained, scaled(x)[0])  # one example too
    assert len(told) == 1 and why in told[0]


def test_integers_give_what_floats_give_on_a_run_of_floats(sources):
    import trainer_run

    trained = trainer_run.load_model(sources["mlp"])
    assert trained.raw_inputs["dtype"] == "float32" and not trained.raw_inputs["whole"]
    floats, told = _predicted(trained, numpy.array([[1.0, 0.0], [0.0, -1.0]]))
    for ints in ([[1, 0], [0, -1]], numpy.array([[1, 0], [0, -1]], numpy.int8)):
        out, told = _predicted(trained, ints)
        assert out.dtype == floats.dtype == numpy.float32 and told == []
        assert numpy.array_equal(out, floats)


@pytest.mark.parametrize("given, what", [
    (numpy.array([["a", "b"]]), "strings (<U1)"), ([["0.5", "1"]], "strings (<U3)"),
    (numpy.array([[b"a", b"b"]]), "byte strings (|S1)"),
    (numpy.array([[None, 1.0]], dtype=object), "Python objects (object)"),
    (numpy.array([[1 + 2j, 0j]]), "complex numbers (complex128)"),
    (numpy.array([["2020-01-01", "2020-01-02"]], dtype="datetime64[D]"), "dates (datetime64[D])"),
])
def test_predict_on_what_is_not_numbers_is_one_type_error(sources, given, what):
    import trainer_run

    trained = trainer_run.load_model(sources["mlp"])
    with pytest.raises(TypeError) as caught:
        trained.predict(given)
    assert str(caught.value) == (f"predict takes numbers (raw inputs as the run read them) and x "
                                 f"holds {what}; convert it to an array of numbers")


@pytest.mark.parametrize("damaged", [None, "x", {"dtype": "uint8", "min": "0", "max": 255, "whole": True},
                                     {"dtype": "str", "min": 0, "max": 1, "whole": False},
                                     {"dtype": "no such type", "min": 0, "max": 1, "whole": False},
                                     {"dtype": "uint8", "min": 5, "max": 1, "whole": True}])
def test_a_run_without_a_usable_record_of_its_inputs_predicts_unchecked(pixels, tmp_path, damaged):
    import shutil

    import trainer_run

    run, x, _ = pixels["uint8"]
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    record = json.loads((copy / "data.json").read_text())
    if damaged is None:
        del record["inputs"]  # a run of an earlier version
    else:
        record["inputs"] = damaged
    (copy / "data.json").write_text(json.dumps(record))
    trained = trainer_run.load_model(copy)
    assert trained.raw_inputs == {}
    _, told = _predicted(trained, x / 255)
    assert told == []
