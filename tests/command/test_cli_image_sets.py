"""The image sets end to end: ``trainer-run dataset=mnist|cifar10|idx`` on tiny files served
by a local HTTP server or put in place beforehand, and the dataset callables themselves.

The training images are one prototype per class (labels 0..9 in turn, 10 images of each), so
the run's validation split (``val_fraction`` 0.1: one image of each class, whichever it
draws) has a loss computed here from the saved parameters (``image_files.check_run``): it
checks that the run trained on these pixels, scaled to [0, 1], with the labels they were
written with. A user's own copies in other layouts: ``test_cli_image_copies.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy
import pytest
from helpers import load_npz, run_cli
from image_files import (
    CIFAR_CLASSES,
    FileServer,
    check_run,
    cifar_archive,
    class_images,
    closed_port_url,
    md5,
    mnist_files,
)

from trainer_run.data import image_sets
from trainer_run.data.idx import write_idx

SHORT = ("model.hidden_sizes=[8]", "trainer.max_iterations=5", "trainer.progress=false",
         "dataset.batch_size=10")


def _md5(contents: dict, names: dict) -> list[str]:
    """Overrides of ``dataset.md5`` for the files ``contents`` (name: bytes) of the roles
    ``names`` (role: name)."""
    return [f"dataset.md5.{role}='{md5(contents[name])}'" for role, name in names.items()]


def test_mnist_downloads_its_files_once_and_trains_on_them(tmp_path):
    contents, arrays = mnist_files(tmp_path / "served")
    with FileServer() as server:
        server.routes = {f"/mnist/{name}": c for name, c in contents.items()}
        mirrors = f"dataset.mirrors=[{closed_port_url()},{server.url('/mnist/')}]"
        result = run_cli("dataset=mnist", f"dataset.root={tmp_path / 'data'}", mirrors,
                         *_md5(contents, image_sets.MNIST_NAMES), "dataset.timeout=5",
                         f"hydra.run.dir={tmp_path / 'run'}", *SHORT)
        assert result.returncode == 0, result.stderr
        assert [server.gets(f"/mnist/{name}") for name in contents] == [1, 1, 1, 1]
    for name, content in contents.items():
        assert (tmp_path / "data" / "mnist" / name).read_bytes() == content
    check_run(tmp_path / "run", arrays["prototypes"])
    record = json.loads((tmp_path / "run" / "data.json").read_text())
    assert record["classes"] == [str(d) for d in range(10)] and record["in_shape"] == [1, 28, 28]


def test_mnist_offline_without_its_files_is_one_line(tmp_path):
    mirror = closed_port_url()
    result = run_cli("dataset=mnist", f"dataset.root={tmp_path}", f"dataset.mirrors=[{mirror}]",
                     f"hydra.run.dir={tmp_path / 'run'}", *SHORT)
    assert result.returncode == 2
    assert result.stderr == (
        f"error: dataset.root: train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
        f"t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz are not in {tmp_path / 'mnist'} (nor "
        f"in {tmp_path}, {tmp_path / 'MNIST' / 'raw'}) and no mirror answered ({mirror}); download "
        "them there by hand or set dataset.root or TRAINER_RUN_DATA to a folder that has them\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no mnist/ folder, no lock file


def test_cifar10_from_an_archive_put_in_trainer_run_data(tmp_path, monkeypatch):
    folder = tmp_path / "data" / "cifar10"
    folder.mkdir(parents=True)
    arrays = cifar_archive(folder / "cifar-10-binary.tar.gz", per_batch=20, prototypes=True)
    contents = {"cifar-10-binary.tar.gz": (folder / "cifar-10-binary.tar.gz").read_bytes()}
    monkeypatch.setenv("TRAINER_RUN_DATA", str(tmp_path / "data"))
    result = run_cli("dataset=cifar10", f"dataset.mirrors=[{closed_port_url()}]",
                     *_md5(contents, image_sets.CIFAR10_NAMES), "dataset.examples.train=100",
                     "dataset.examples.test=20", f"hydra.run.dir={tmp_path / 'run'}", *SHORT)
    assert result.returncode == 0, result.stderr
    assert (folder / "cifar-10-batches-bin" / "test_batch.bin").stat().st_size == 20 * 3073
    check_run(tmp_path / "run", arrays["prototypes"])
    record = json.loads((tmp_path / "run" / "data.json").read_text())
    assert record["classes"] == CIFAR_CLASSES and record["in_shape"] == [3, 32, 32]
    # the test split, evaluated once at the end with the final parameters
    params = load_npz(tmp_path / "run" / "model.npz")
    x, y = arrays["test"]
    x = x.reshape(len(x), -1).astype(numpy.float64) / 255
    logits = numpy.maximum(x @ params["l1/W"].T + params["l1/b"], 0) @ params["l2/W"].T + params["l2/b"]
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_p = shifted - numpy.log(numpy.exp(shifted).sum(axis=1, keepdims=True))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["test/loss"] == pytest.approx(-log_p[range(len(y)), y].mean(), rel=1e-5)


@pytest.mark.parametrize("compress", [True, False], ids=["gz", "raw"])
def test_idx_files_relative_to_the_working_folder(tmp_path, compress):
    x, y, prototypes = class_images(100, (12, 12))
    (tmp_path / "data").mkdir()
    for name, array in (("train-x", x), ("train-y", y), ("test-x", x[:7]), ("test-y", y[:7])):
        write_idx(tmp_path / "data" / name, array, compress=compress)
    result = run_cli("dataset=idx", "dataset.train_images=data/train-x",
                     "dataset.train_labels=data/train-y", "dataset.test_images=data/test-x",
                     "dataset.test_labels=data/test-y", "hydra.run.dir=run", *SHORT, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    check_run(tmp_path / "run", prototypes)


def test_idx_without_its_files_names_the_key(tmp_path):
    result = run_cli("dataset=idx", "dataset.train_images=missing.gz", "hydra.run.dir=run", *SHORT,
                     cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (f"error: dataset.train_images=missing.gz: no such file (relative to "
                             f"{tmp_path})\n")


def test_a_time_limit_that_is_not_positive_is_one_line(tmp_path):
    result = run_cli("dataset=mnist", f"dataset.root={tmp_path}", "dataset.time_limit=0",
                     f"hydra.run.dir={tmp_path / 'run'}", *SHORT)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == "error: dataset.time_limit must be > 0, got 0", result.stderr


def _users_file(path, content: bytes = b"export PATH=$HOME/bin:$PATH\n") -> tuple:
    """``path`` made a file of the user's (a shell start-up file) with an old mtime; what must
    stay of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    return path.read_bytes(), os.stat(path).st_mtime_ns


def _planted_line(path, what: str) -> str:
    return (f"error: dataset.root: {path} is {what}: a download writes and reads its files in "
            f"{path.parent} only as regular files of its own, so that what it writes changes no "
            "other file; remove it and run again")


def _served(tmp_path, dataset: str) -> tuple[dict, dict]:
    """What a mirror serves for ``dataset`` (name: bytes) and the roles of its files."""
    if dataset == "mnist":
        return mnist_files(tmp_path / "served")[0], image_sets.MNIST_NAMES
    archive = tmp_path / "served" / "cifar-10-binary.tar.gz"
    archive.parent.mkdir()
    cifar_archive(archive, per_batch=2)
    return {archive.name: archive.read_bytes()}, image_sets.CIFAR10_NAMES


@pytest.mark.parametrize("dataset, planted, kind", [
    ("mnist", "mnist/train-images-idx3-ubyte.gz.part", "symbolic"),
    ("cifar10", "cifar10/.fetch.lock", "hard"),
])
def test_a_link_planted_in_the_data_folder_is_one_line_and_its_target_is_kept(tmp_path, dataset,
                                                                              planted, kind):
    """The probe: a ``train-images-idx3-ubyte.gz.part`` linked to ``~/.bashrc`` got the mirror's
    bytes. Now ``trainer-run dataset=mnist`` refuses the link in one line before any request;
    the variant: CIFAR-10, whose ``.fetch.lock`` is a hard link to the file."""
    bashrc = tmp_path / "home" / ".bashrc"
    before = _users_file(bashrc)
    contents, names = _served(tmp_path, dataset)
    root = tmp_path / "data"
    planted = root / planted
    planted.parent.mkdir(parents=True)
    if kind == "symbolic":
        planted.symlink_to(bashrc)
    else:
        os.link(bashrc, planted)
    with FileServer() as server:
        server.routes = {f"/{name}": content for name, content in contents.items()}
        result = run_cli(f"dataset={dataset}", f"dataset.root={root}",
                         f"dataset.mirrors=[{server.url('/')}]", *_md5(contents, names),
                         "dataset.timeout=5", f"hydra.run.dir={tmp_path / 'run'}", *SHORT)
        assert server.requests == []
    assert result.returncode == 2, result.stderr
    what = "a symbolic link" if kind == "symbolic" else "a file with other hard links"
    assert result.stderr.splitlines() == [_planted_line(planted, what)]
    assert (bashrc.read_bytes(), os.stat(bashrc).st_mtime_ns) == before
    assert sorted(p.name for p in planted.parent.iterdir()) == [planted.name]
    assert not (tmp_path / "run").exists()


def test_a_link_planted_in_a_runs_data_folder_is_refused_by_resume_and_trainer_eval(tmp_path):
    """The probe's commands: a run of the user's whose data root is a shared folder the
    stranger could write; the stranger removed a file and planted its ``.part`` as a link to
    ``~/.bashrc``. ``trainer-run resume=`` and ``trainer-eval`` (which fetch the file again)
    refuse the link in one line each and ask the mirror for nothing; the file is kept."""
    contents, _ = mnist_files(tmp_path / "served")
    root, run = tmp_path / "shared", tmp_path / "run"
    with FileServer() as server:
        server.routes = {f"/{name}": content for name, content in contents.items()}
        made = run_cli("dataset=mnist", f"dataset.root={root}", f"dataset.mirrors=[{server.url('/')}]",
                       *_md5(contents, image_sets.MNIST_NAMES), "dataset.timeout=5",
                       f"hydra.run.dir={run}", *SHORT)
        assert made.returncode == 0, made.stderr
        asked = len(server.requests)
        bashrc = tmp_path / "home" / ".bashrc"
        before = _users_file(bashrc)
        (root / "mnist" / "train-images-idx3-ubyte.gz").unlink()
        planted = root / "mnist" / "train-images-idx3-ubyte.gz.part"
        planted.symlink_to(bashrc)
        for command in ([sys.executable, "-m", "trainer_run.cli", f"resume={run}",
                         "trainer.max_iterations=8"],
                        [sys.executable, "-m", "trainer_run.cli.evaluate", str(run)]):
            result = subprocess.run(command, capture_output=True, text=True, timeout=300)
            assert result.returncode == 2, result.stderr
            assert result.stderr.splitlines() == [_planted_line(planted, "a symbolic link")]
            assert (bashrc.read_bytes(), os.stat(bashrc).st_mtime_ns) == before
        assert len(server.requests) == asked
