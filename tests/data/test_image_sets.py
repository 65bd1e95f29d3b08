"""The image-set callables (data/image_sets.py) on tiny files: mnist reads files put in place, cifar10
gives the archive's images, where the root is, wrong checksums or files named, the configs repeating
the published checksums and mirrors, and a mirror slower than the limit passing its turn."""

from __future__ import annotations

from pathlib import Path

import numpy
import pytest
import yaml
from image_files import (
    FileServer,
    cifar_archive,
    closed_port_url,
    md5,
    mnist_files,
)

import trainer_run.configs
from trainer_run.data import image_sets
from trainer_run.errors import ConfigError


def test_the_mnist_callable_reads_files_put_in_place(tmp_path):
    contents, arrays = mnist_files(tmp_path / "mnist")
    digests = {role: md5(contents[name]) for role, name in image_sets.MNIST_NAMES.items()}
    splits = image_sets.mnist(root=tmp_path, mirrors=[closed_port_url()], md5=digests, timeout=5)
    for split, (x, y) in (("train", splits.train), ("test", splits.test)):
        x_ref, y_ref = arrays[split]
        assert x.dtype == numpy.uint8 and x.shape == (len(x_ref), 1, 28, 28)
        numpy.testing.assert_array_equal(x[:, 0], x_ref)
        numpy.testing.assert_array_equal(y, y_ref)
    assert splits.val is None
    assert splits.origin == {"train": str(tmp_path / "mnist" / "train-images-idx3-ubyte.gz"),
                             "test": str(tmp_path / "mnist" / "t10k-images-idx3-ubyte.gz")}


def test_the_cifar10_callable_gives_the_archives_images(tmp_path):
    (tmp_path / "cifar10").mkdir()
    arrays = cifar_archive(tmp_path / "cifar10" / "cifar-10-binary.tar.gz", per_batch=3)
    archive = md5((tmp_path / "cifar10" / "cifar-10-binary.tar.gz").read_bytes())
    splits = image_sets.cifar10(root=tmp_path, mirrors=[], md5={"archive": archive},
                                examples={"train": 15, "test": 3})
    for (x, y), (x_ref, y_ref) in ((splits.train, arrays["train"]), (splits.test, arrays["test"])):
        numpy.testing.assert_array_equal(x, x_ref)
        numpy.testing.assert_array_equal(y, y_ref)


def test_the_root_is_the_argument_else_trainer_run_data_else_the_cache(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRAINER_RUN_DATA", "/data/sets")
    monkeypatch.setenv("XDG_CACHE_HOME", "/var/cache/me")
    assert image_sets.data_root("here") == tmp_path / "here"
    assert image_sets.data_root() == Path("/data/sets")
    monkeypatch.delenv("TRAINER_RUN_DATA")
    assert image_sets.data_root() == Path("/var/cache/me/trainer-run")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # ignored, as the XDG spec says
    monkeypatch.setenv("HOME", str(tmp_path))
    assert image_sets.data_root() == tmp_path / ".cache" / "trainer-run"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert image_sets.data_root() == tmp_path / ".cache" / "trainer-run"


def test_wrong_checksums_or_files_for_a_set_name_the_argument(tmp_path):
    with pytest.raises(ConfigError, match=r"^md5 must give the md5 of each of archive \(the files "
                                          r"cifar-10-binary.tar.gz\), got tarball$"):
        image_sets.cifar10(root=tmp_path, md5={"tarball": "0" * 32})
    with pytest.raises(ConfigError, match=r"^md5.test_labels must be 32 hex digits or null \(not "
                                          r"checked\), got 'abc'$"):
        image_sets.fashion_mnist(root=tmp_path, md5={**image_sets.MNIST_MD5, "test_labels": "abc"})
    with pytest.raises(ConfigError, match=r"^examples.train must be a positive integer \(a multiple "
                                          r"of 5: the training files hold equal shares\), got 12$"):
        image_sets.cifar10(root=tmp_path, examples={"train": 12, "test": 3})
    mnist_files(tmp_path / "mnist")
    (tmp_path / "mnist" / "train-images-idx3-ubyte.gz").write_bytes(b"other")
    with pytest.raises(ConfigError, match=f"^root: {tmp_path / 'mnist' / 'train-images-idx3-ubyte.gz'} "
                                          "is not an IDX file: it starts with 6f746865"):
        image_sets.mnist(root=tmp_path, mirrors=[])


def test_the_configs_repeat_the_published_checksums_and_mirrors():
    configs = Path(trainer_run.configs.__file__).parent / "dataset"
    for name, digests, mirrors in (("mnist", image_sets.MNIST_MD5, image_sets.MNIST_MIRRORS),
                                   ("fashion_mnist", image_sets.FASHION_MNIST_MD5,
                                    image_sets.FASHION_MNIST_MIRRORS),
                                   ("cifar10", image_sets.CIFAR10_MD5, image_sets.CIFAR10_MIRRORS)):
        config = yaml.safe_load((configs / f"{name}.yaml").read_text())
        assert config["md5"] == digests and config["mirrors"] == list(mirrors)
        assert config["_target_"] == f"trainer_run.data.image_sets.{name}"
        assert config["root"] is None and config["normalize"] == "unit"


def test_a_mirror_slower_than_the_time_limit_passes_the_turn(tmp_path):
    """``time_limit`` reaches the download: the first mirror keeps sending (a 4 KiB block every
    0.2 s, never a read timeout) but does not give either images file (3 and 4 blocks) within
    0.3 s, so the second gives them; with the default hour it would have served all four."""
    contents, _ = mnist_files(tmp_path / "served")
    md5s = {role: md5(contents[name]) for role, name in image_sets.MNIST_NAMES.items()}
    with FileServer() as slow, FileServer() as fast:
        slow.delay = 0.2
        for server in (slow, fast):
            server.routes = {f"/{name}": c for name, c in contents.items()}
        image_sets.mnist(tmp_path / "data", [slow.url(), fast.url()], md5s, timeout=5, time_limit=0.3)
        assert all(fast.gets(f"/{name}") for name in contents if "images" in name)
    for name, content in contents.items():
        assert (tmp_path / "data" / "mnist" / name).read_bytes() == content
