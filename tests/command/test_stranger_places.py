"""A stranger's run never chooses where, nor from what, the user's commands download.

A stranger trains on MNIST (tiny files served on 127.0.0.1) with a data root, mirrors and md5
of their own; the user then evaluates and resumes that run. The user's commands look for MNIST
in the user's own data folder (``TRAINER_RUN_DATA``), ask no mirror of the stranger's, check
the published md5 and leave the stranger's folder byte-identical. The user's own run keeps its
root: the rule follows the signature, not the option."""

from __future__ import annotations

import pytest
from image_files import FileServer, closed_port_url, md5, mnist_files
from run_folders import command, copy_run, error_lines, snapshot

from trainer_run.data import image_sets

SHORT = ("model.hidden_sizes=[8]", "trainer.max_iterations=4", "trainer.checkpoint_interval=2",
         "trainer.eval_interval=2", "trainer.progress=false", "dataset.batch_size=10")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The stranger's mirror, serving tiny MNIST files; ``contents``: their bytes by name."""
    contents, _ = mnist_files(tmp_path_factory.mktemp("served"))
    with FileServer() as server:
        server.routes = {f"/mnist/{name}": c for name, c in contents.items()}
        server.contents = contents
        yield server


@pytest.fixture(scope="module")
def strangers(tmp_path_factory, server):
    """The stranger's run, trained on the served files with the data root ``theirs``."""
    folder = tmp_path_factory.mktemp("stranger")
    return train(folder, folder / "stranger", server, folder / "theirs"), folder / "theirs"


@pytest.fixture()
def served(server):
    server.requests.clear()
    yield server, server.contents


@pytest.fixture()
def run(strangers, tmp_path):
    """A copy of the stranger's run to work on (its saved data root stays the stranger's)."""
    return copy_run(strangers[0], tmp_path / "run")


def train(tmp_path, keys, server, root):
    digests = [f"dataset.md5.{role}='{md5(server.contents[name])}'"
               for role, name in image_sets.MNIST_NAMES.items()]
    run = tmp_path / f"run-{keys.name}"
    done = command("trainer-run", "dataset=mnist", f"dataset.root={root}",
                   f"dataset.mirrors=[{server.url('/mnist/')}]", *digests, *SHORT,
                   f"hydra.run.dir={run}", keys=keys, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    server.requests.clear()
    return run


@pytest.mark.parametrize("how", ["trainer-eval", "resume"])
def test_a_strangers_root_mirrors_and_md5_are_not_the_users(how, tmp_path, served, strangers, run,
                                                            monkeypatch):
    theirs = strangers[1]
    mine = tmp_path / "mine"
    monkeypatch.setenv("TRAINER_RUN_DATA", str(mine))
    before = snapshot(theirs)
    mirror = closed_port_url()
    arguments = ((run, f"dataset.mirrors=[{mirror}]") if how == "trainer-eval"
                 else (f"resume={run}", "trainer.max_iterations=6", f"dataset.mirrors=[{mirror}]"))
    done = command("trainer-run" if how == "resume" else how, *arguments,
                   keys=tmp_path / "user", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert error_lines(done) == [
        f"error: dataset.root: train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
        f"t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz are not in {mine / 'mnist'} (nor "
        f"in {mine}, {mine / 'MNIST' / 'raw'}) and no mirror answered ({mirror}); download "
        "them there by hand or set dataset.root or TRAINER_RUN_DATA to a folder that has them"]
    assert served[0].requests == []  # the stranger's mirror was never asked
    assert snapshot(theirs) == before
    assert not mine.exists()


def test_a_strangers_published_md5_is_checked_in_the_users_folder(tmp_path, served, run,
                                                                  monkeypatch):
    """The stranger's files, put into the user's data folder, are not the published MNIST:
    their md5 differs and they hold 100 images, not 60000, so they are refused."""
    mine = tmp_path / "mine"
    (mine / "mnist").mkdir(parents=True)
    for name, content in served[1].items():
        (mine / "mnist" / name).write_bytes(content)
    monkeypatch.setenv("TRAINER_RUN_DATA", str(mine))
    done = command("trainer-eval", run, f"dataset.mirrors=[{closed_port_url()}]",
                   keys=tmp_path / "user", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = error_lines(done)
    assert "train-images-idx3-ubyte.gz" in line and "60000" in line, line


def test_the_users_own_run_keeps_its_root(tmp_path, served, monkeypatch):
    root = tmp_path / "my-root"
    run = train(tmp_path, tmp_path / "user", served[0], root)
    monkeypatch.setenv("TRAINER_RUN_DATA", str(tmp_path / "elsewhere"))
    done = command("trainer-eval", run, keys=tmp_path / "user", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert served[0].requests == []  # the files were in its root already
    assert not (tmp_path / "elsewhere").exists()


LOAD_MODEL = ("import sys, trainer_run\n"
              "trainer_run.load_model(sys.argv[1])\n")
RESUME = ("import sys, trainer_run\n"
          "from trainer_run.errors import JobFailed\n"
          "try:\n    trainer_run.resume(sys.argv[1], ['trainer.max_iterations=6', sys.argv[2]])\n"
          "except JobFailed as e:\n    print('error:', e, file=sys.stderr)\n    sys.exit(2)\n")


@pytest.mark.parametrize("how", ["init_from", "lr_find", "trainer-export", "trainer-report",
                                 "load_model", "trainer_run.resume"])
def test_no_command_on_a_strangers_run_reaches_its_places(how, tmp_path, served, strangers, run,
                                                          monkeypatch):
    """Every other command that loads the stranger's run: the stranger's mirror gets no
    request and its data folder keeps every byte and mtime; none downloads into the user's."""
    theirs = strangers[1]
    mine = tmp_path / "mine"
    monkeypatch.setenv("TRAINER_RUN_DATA", str(mine))
    before = snapshot(theirs)
    closed = f"dataset.mirrors=[{closed_port_url()}]"
    new_run = ("dataset=mnist_like", "dataset.size=120", "init_from_strict=false",
               "trainer.max_iterations=2", "trainer.progress=false", f"init_from={run}",
               f"hydra.run.dir={tmp_path / 'new'}")
    name, arguments, code = {
        "init_from": ("trainer-run", new_run, 0),
        "lr_find": ("trainer-run", (*new_run, "debug=lr_find",
                                    "trainer.lr_find.num_training=5", "trainer.lr_find.skip_begin=1"), 0),
        "trainer-export": ("trainer-export", (run, "format=npz"), 0),
        "trainer-report": ("trainer-report", (run,), 0),
        "load_model": ("python", (LOAD_MODEL, run), 0),
        "trainer_run.resume": ("python", (RESUME, run, closed), 2),
    }[how]
    done = command(name, *arguments, keys=tmp_path / "user", cwd=tmp_path)
    assert done.returncode == code, done.stderr
    assert served[0].requests == []
    assert snapshot(theirs) == before
    assert not mine.exists()


def test_a_strangers_mlflow_server_is_not_the_users(tmp_path, served, monkeypatch):
    """A stranger's run whose saved config logs to an MLflow server of theirs: the user's resume
    logs to the user's store ($MLFLOW_TRACKING_URI) and asks the stranger's server nothing."""
    pytest.importorskip("mlflow")
    from run_folders import make_run

    from tests.runs.test_trust import tamper_checkpoint

    run = make_run(tmp_path, tmp_path / "stranger")
    server = served[0]
    logger = {"_target_": "trainer_run.training.loggers.mlflow.MLflow",
              "tracking_uri": server.url("/"), "experiment_name": "theirs"}
    tamper_checkpoint(run, "logger.theirs", logger)
    store = tmp_path / "my-mlruns"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"file:{store}")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 refuses a file store without
    done = command("trainer-run", f"resume={run}", "trainer.max_iterations=9",
                   keys=tmp_path / "user", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert server.requests == []
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"file:{store}")
    [experiment] = [e for e in client.search_experiments() if e.name == "theirs"]
    [logged] = client.search_runs([experiment.experiment_id])
    steps = [m.step for m in client.get_metric_history(logged.info.run_id, "train/loss")]
    assert steps and max(steps) == 9
