"""A user's own copy of MNIST, Fashion-MNIST or CIFAR-10 from the command line: each layout
(ours, the files in the root, torchvision's ``MNIST/raw`` gzipped or not, CIFAR-10's
``cifar-10-batches-bin`` or its archive), a recompressed copy with another md5 (used, with a
note and its content's md5 in ``data.json``), ``dataset.md5.*=null``, and wrong files, refused
naming them. Every run checks that it trained on the copy's pixels (``image_files.check_run``)
and that nothing in the user's folder changed: no file or folder appeared, none was modified
(a lock file made and removed would change its folder's modification time).

The files are tiny (100 training and 20 test images), so the runs give their sizes with
``dataset.examples.*`` and, to stand for the published files, their md5 with
``dataset.md5.*``."""

from __future__ import annotations

import gzip
import hashlib
import json
import tarfile
from pathlib import Path

import pytest
from helpers import run_cli
from image_files import check_run, cifar_archive, closed_port_url, md5, mnist_files

from trainer_run.data import image_sets

SHORT = ("model.hidden_sizes=[8]", "trainer.max_iterations=5", "trainer.progress=false",
         "dataset.batch_size=10", "dataset.examples.train=100", "dataset.examples.test=20")
RAW = {name: name.removesuffix(".gz") for name in image_sets.MNIST_NAMES.values()}


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """The four files as published (gzipped), their decompressed content, and the arrays."""
    contents, arrays = mnist_files(tmp_path_factory.mktemp("published"))
    return contents, {name: gzip.decompress(c) for name, c in contents.items()}, arrays


def _md5s(contents: dict, names=image_sets.MNIST_NAMES) -> list[str]:
    return [f"dataset.md5.{role}='{md5(contents[name])}'" for role, name in names.items()]


def _listing(root: Path) -> list:
    """Every file and folder under ``root`` with its size and modification time."""
    return sorted((str(p.relative_to(root)), p.is_dir(), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in [root, *root.rglob("*")])


def _run(tmp_path: Path, root: Path, *args):
    """``trainer-run`` on the copy under ``root`` (no mirror answers), the listing of ``root``
    compared before and after."""
    before = _listing(root)
    result = run_cli(f"dataset.root={root}", f"dataset.mirrors=[{closed_port_url()}]", *args,
                     f"hydra.run.dir={tmp_path / 'run'}", *SHORT)
    assert _listing(root) == before
    return result


def _write(folder: Path, files: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (folder / name).write_bytes(content)


LAYOUTS = {  # name: (folder under the root, gzipped, root given as the folder under it)
    "ours": ("mnist", True, ""),
    "in the root": ("", True, ""),
    "torchvision gz": ("MNIST/raw", True, ""),
    "torchvision uncompressed": ("MNIST/raw", False, ""),
    "torchvision both": ("MNIST/raw", None, ""),
    "torchvision's MNIST as the root": ("MNIST/raw", True, "MNIST"),
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_copy_in_each_layout_is_read_where_it_is(tmp_path, published, layout):
    """Published files (gzipped, their md5 given) are used without a word; uncompressed ones
    (torchvision extracts them) for their content, named in a note."""
    contents, raw, arrays = published
    folder, gzipped, root = LAYOUTS[layout]
    copy = tmp_path / "data" / folder
    if gzipped in (True, None):
        _write(copy, contents)
    if gzipped in (False, None):
        _write(copy, {RAW[name]: content for name, content in raw.items()})
    result = _run(tmp_path, tmp_path / "data" / root, "dataset=mnist", *_md5s(contents))
    assert result.returncode == 0, result.stderr
    check_run(tmp_path / "run", arrays["prototypes"])
    files = json.loads((tmp_path / "run" / "data.json").read_text())["files"]
    for role, name in image_sets.MNIST_NAMES.items():
        used = copy / (name if gzipped in (True, None) else RAW[name])
        assert files[role]["path"] == str(used)
        if gzipped is False:
            assert files[role] == {"path": str(used), "md5": md5(raw[name]),
                                   "content_md5": md5(raw[name])}
        else:
            assert files[role] == {"path": str(used), "md5": md5(contents[name])}
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert notes == ([f"note: 4 files in {copy} are used for content (valid IDX headers of the "
                      "published type, shape and size), not md5 (uncompressed); data.json "
                      "records the checksums"] if gzipped is False else []), result.stderr


def test_a_recompressed_copy_is_used_for_its_content_with_a_note(tmp_path, published):
    """Other gzip settings give other bytes and another md5, the same content: used, with one
    short note counting the files; data.json keeps both checksums and the content's md5."""
    contents, raw, arrays = published
    again = {name: gzip.compress(raw[name], compresslevel=1, mtime=1) for name in raw}
    assert all(md5(again[name]) != md5(contents[name]) for name in raw)
    _write(tmp_path / "data", again)
    result = _run(tmp_path, tmp_path / "data", "dataset=mnist", *_md5s(contents))
    assert result.returncode == 0, result.stderr
    check_run(tmp_path / "run", arrays["prototypes"])
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert notes == [f"note: 4 files in {tmp_path / 'data'} are used for content (valid IDX "
                     "headers of the published type, shape and size), not md5 (another md5); "
                     "data.json records the checksums"]
    files = json.loads((tmp_path / "run" / "data.json").read_text())["files"]
    for role, name in image_sets.MNIST_NAMES.items():
        assert files[role] == {"path": str(tmp_path / "data" / name), "md5": md5(again[name]),
                               "content_md5": md5(raw[name])}


def test_md5_null_checks_the_content_only_and_says_nothing(tmp_path, published):
    contents, raw, arrays = published
    _write(tmp_path / "data" / "mnist", {n: gzip.compress(c, mtime=7) for n, c in raw.items()})
    nulls = [f"dataset.md5.{role}=null" for role in image_sets.MNIST_NAMES]
    result = _run(tmp_path, tmp_path / "data", "dataset=mnist", *nulls)
    assert result.returncode == 0, result.stderr
    assert "note:" not in result.stderr
    check_run(tmp_path / "run", arrays["prototypes"])
    files = json.loads((tmp_path / "run" / "data.json").read_text())["files"]
    assert files["train_images"] == {"path": str(tmp_path / "data" / "mnist" / RAW[
        "train-images-idx3-ubyte.gz"]) + ".gz", "content_md5": md5(raw["train-images-idx3-ubyte.gz"])}


def test_fashion_mnist_in_torchvisions_layout(tmp_path, published):
    contents, _, arrays = published
    _write(tmp_path / "data" / "FashionMNIST" / "raw", contents)
    _write(tmp_path / "data" / "MNIST" / "raw", {n: b"not these" for n in contents})
    result = _run(tmp_path, tmp_path / "data", "dataset=fashion_mnist", *_md5s(contents))
    assert result.returncode == 0, result.stderr
    check_run(tmp_path / "run", arrays["prototypes"])


def _refused(tmp_path: Path, root: Path, *args) -> str:
    """The one error line of a run refused with status 2, having created no run directory."""
    result = _run(tmp_path, root, *args)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.splitlines()) == 1 and not (tmp_path / "run").exists()
    return result.stderr


def test_a_truncated_or_corrupt_file_is_refused_naming_it(tmp_path, published):
    contents, raw, _ = published
    images = "train-images-idx3-ubyte.gz"
    _write(tmp_path / "data", {**contents, images: gzip.compress(raw[images][:-784])})
    error = _refused(tmp_path, tmp_path / "data", "dataset=mnist", *_md5s(contents))
    assert error == (f"error: dataset.root: {tmp_path / 'data' / images} is truncated: its header "
                     f"declares 100x28x28 uint8, 78400 bytes of data and it holds 77616 bytes of "
                     "data; download or copy it again\n")
    _write(tmp_path / "data", {images: contents[images][:len(contents[images]) // 2]})
    error = _refused(tmp_path, tmp_path / "data", "dataset=mnist", *_md5s(contents))
    assert error.startswith(f"error: dataset.root: {tmp_path / 'data' / images} is truncated or "
                            "damaged (gzip: ")
    _write(tmp_path / "data", {images: gzip.compress(b"\x08\x03" + raw[images][2:])})
    error = _refused(tmp_path, tmp_path / "data", "dataset=mnist", *_md5s(contents))
    assert error.startswith(f"error: dataset.root: {tmp_path / 'data' / images} is not an IDX "
                            "file: it starts with 0803")


def test_a_file_of_another_size_is_refused_naming_it_and_the_setting(tmp_path, published):
    """A valid IDX file of 50 images where 100 are published: not a copy of the set."""
    contents, raw, _ = published
    labels = "train-labels-idx1-ubyte.gz"
    fewer = gzip.compress(b"\0\0\x08\x01" + (50).to_bytes(4, "big") + raw[labels][8:58])
    _write(tmp_path / "data", {**contents, labels: fewer})
    error = _refused(tmp_path, tmp_path / "data", "dataset=mnist", *_md5s(contents))
    assert error == (f"error: dataset.root: {tmp_path / 'data' / labels} has md5 {md5(fewer)}, not "
                     f"{md5(contents[labels])}, and holds 50 uint8 values, not the 100 uint8 of "
                     "the set's train split (dataset.examples.train=100): replace it with the "
                     "published file, or for a set of 50 train images in this format set "
                     "dataset.examples.train=50\n")


def test_a_missing_set_downloads_into_our_folder_only_and_leaves_nothing_offline(tmp_path):
    """Offline, with no copy: one line naming where it looked; the mnist/ folder made for the
    download and its lock file are removed again, so the root holds what it held."""
    (tmp_path / "data" / "notes").mkdir(parents=True)
    result = run_cli("dataset=mnist", f"dataset.root={tmp_path / 'data'}",
                     f"dataset.mirrors=[{closed_port_url()}]", f"hydra.run.dir={tmp_path / 'run'}",
                     *SHORT)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("error: dataset.root: train-images-idx3-ubyte.gz, ")
    assert f"are not in {tmp_path / 'data' / 'mnist'} (nor in {tmp_path / 'data'}, " in result.stderr
    assert [p.name for p in (tmp_path / "data").rglob("*")] == ["notes"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


@pytest.fixture(scope="module")
def cifar(tmp_path_factory):
    """A CIFAR-10 archive of 20 records a batch (100 training, 20 test), its md5 and arrays."""
    folder = tmp_path_factory.mktemp("cifar")
    arrays = cifar_archive(folder / "cifar-10-binary.tar.gz", per_batch=20, prototypes=True)
    return folder / "cifar-10-binary.tar.gz", arrays


def _extract(archive: Path, into: Path) -> Path:
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "cifar-10-batches-bin"


@pytest.mark.parametrize("layout", ["folder in the root", "the root is the folder",
                                    "archive in the root", "recompressed archive"])
def test_cifar10_from_a_copy_outside_our_folder_is_read_in_place(tmp_path, cifar, layout):
    """An extracted folder, or an archive read without extracting it: nothing is written."""
    archive, arrays = cifar
    root = tmp_path / "data"
    digest = md5(archive.read_bytes())
    if layout.startswith("folder") or layout.startswith("the root"):
        batches = _extract(archive, root)
        root = batches if layout == "the root is the folder" else root
    else:
        root.mkdir()
        content = archive.read_bytes()
        if layout == "recompressed archive":
            content = gzip.compress(gzip.decompress(content), compresslevel=1, mtime=3)
        (root / archive.name).write_bytes(content)
    result = _run(tmp_path, root, "dataset=cifar10", f"dataset.md5.archive='{digest}'")
    assert result.returncode == 0, result.stderr
    check_run(tmp_path / "run", arrays["prototypes"])
    files = json.loads((tmp_path / "run" / "data.json").read_text())["files"]
    if layout == "recompressed archive":
        batches = _extract(archive, tmp_path / "reference")
        joined = b"".join((batches / n).read_bytes() for n in
                          [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"])
        assert files["archive"]["content_md5"] == hashlib.md5(joined).hexdigest()
        assert files["archive"]["md5"] != digest
        assert (f"note: cifar-10-binary.tar.gz in {root} is used for content (the published "
                "members and number of records), not md5 (another md5); data.json records the "
                "checksums") in result.stderr
    else:
        assert "note:" not in result.stderr
        assert files == ({"archive": {"path": str(root / archive.name), "md5": digest}}
                         if "archive" in layout else {"batches": {"path": str(batches)}})


def test_cifar10_batches_of_another_size_are_refused_naming_the_file(tmp_path, cifar):
    archive, _ = cifar
    batches = _extract(archive, tmp_path / "data")
    (batches / "data_batch_3.bin").write_bytes((batches / "data_batch_3.bin").read_bytes()[:3073 * 19])
    error = _refused(tmp_path, tmp_path / "data", "dataset=cifar10")
    assert error == (f"error: dataset.root: {batches / 'data_batch_3.bin'} holds 19 records, not the "
                     f"20 of CIFAR-10's published batches (dataset.examples.train=100): it is not "
                     f"a copy of the release; delete {batches} to extract it again from the "
                     "archive, or replace it\n")
