"""CIFAR-10's binary release (data/cifar.py), read back against arrays and bytes built
independently here: the archive extracted once or read in place, wrong sizes, links and stray
paths, archives that are not the release and damaged folders refused naming what is wrong."""

from __future__ import annotations

import hashlib
import os
import re
import tarfile

import numpy
import pytest
from image_files import CIFAR_CLASSES, cifar_archive

from trainer_run.data import cifar
from trainer_run.errors import ConfigError


def test_a_cifar_archive_extracts_once_and_reads_back_exactly(tmp_path):
    arrays = cifar_archive(tmp_path / "cifar-10-binary.tar.gz", per_batch=3)
    batches = cifar.extract(tmp_path / "cifar-10-binary.tar.gz", tmp_path)
    assert batches == tmp_path / "cifar-10-batches-bin" == cifar.extracted(tmp_path)
    assert sorted(p.name for p in batches.iterdir()) == sorted(cifar.MEMBERS)  # not readme.html
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cifar-10-batches-bin",
                                                          "cifar-10-binary.tar.gz"]
    (tmp_path / "cifar-10-binary.tar.gz").unlink()  # later reads need only the folder
    train, test, classes = cifar.read(batches)
    assert classes == CIFAR_CLASSES
    for (x, y), (x_ref, y_ref) in ((train, arrays["train"]), (test, arrays["test"])):
        assert x.dtype == numpy.uint8 and x.shape == x_ref.shape
        numpy.testing.assert_array_equal(x, x_ref)
        numpy.testing.assert_array_equal(y, y_ref)
    assert train[0].shape == (15, 3, 32, 32) and test[0].shape == (3, 3, 32, 32)


def test_an_archive_read_in_place_gives_the_folders_arrays_and_writes_nothing(tmp_path):
    """read_archive: the arrays read() gives from the extracted folder, the same records'
    md5, the published counts checked by member; the archive's folder is left as it was."""
    archive = tmp_path / "in" / "cifar-10-binary.tar.gz"
    archive.parent.mkdir()
    arrays = cifar_archive(archive, per_batch=4)
    in_place, from_disk = hashlib.md5(), hashlib.md5()
    train, test, classes = cifar.read_archive(archive, {"train": 4, "test": 4}, in_place)
    assert sorted(p.name for p in archive.parent.iterdir()) == ["cifar-10-binary.tar.gz"]
    batches = cifar.extract(archive, tmp_path)
    assert classes == CIFAR_CLASSES
    for (x, y), (x_ref, y_ref), (x_disk, _) in zip((train, test), (arrays["train"], arrays["test"]),
                                                   cifar.read(batches, None, from_disk)[:2]):
        numpy.testing.assert_array_equal(x, x_ref)
        numpy.testing.assert_array_equal(x, x_disk)
        numpy.testing.assert_array_equal(y, y_ref)
    joined = b"".join((batches / name).read_bytes() for name in (*cifar.TRAIN, cifar.TEST))
    assert in_place.hexdigest() == from_disk.hexdigest() == hashlib.md5(joined).hexdigest()
    with pytest.raises(ConfigError, match=re.escape(
            f"{archive}:cifar-10-batches-bin/data_batch_1.bin holds 4 records, not the 5 of "
            "CIFAR-10's published batches (dataset.examples.train=25): it is not a copy of the "
            "release; replace it with cifar-10-binary.tar.gz")):
        cifar.read_archive(archive, {"train": 5, "test": 4})


def test_a_cifar_member_of_the_wrong_size_is_refused_and_nothing_extracted(tmp_path):
    member = "cifar-10-batches-bin/data_batch_3.bin"
    cifar_archive(tmp_path / "c.tar.gz", per_batch=2, sizes={member: 2 * 3073 - 1})
    with pytest.raises(ConfigError) as error:
        cifar.extract(tmp_path / "c.tar.gz", tmp_path)
    assert str(error.value) == (f"{tmp_path / 'c.tar.gz'}: {member} has 6145 bytes, not a multiple "
                                "of 3073 (CIFAR-10 batches are records of 3073 bytes); the archive "
                                "is damaged: delete it to download it again")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.tar.gz"]


def test_links_and_stray_paths_in_a_cifar_archive_write_nothing_outside(tmp_path):
    link = tarfile.TarInfo("cifar-10-batches-bin/test_batch.bin")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    stray = {"../evil.bin": b"x", f"{tmp_path}/evil.bin": b"x", "cifar-10-batches-bin/../../e.bin": b"x"}
    (tmp_path / "in").mkdir()
    cifar_archive(tmp_path / "in" / "c.tar.gz", extra=stray)
    batches = cifar.extract(tmp_path / "in" / "c.tar.gz", tmp_path / "in")
    assert sorted(p.name for p in batches.iterdir()) == sorted(cifar.MEMBERS)
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(["in", "c.tar.gz", batches.name,
                                                                  *cifar.MEMBERS])
    (tmp_path / "out").mkdir()
    cifar_archive(tmp_path / "out" / "c.tar.gz", extra={link.name: link})
    with pytest.raises(ConfigError, match="test_batch.bin is not a regular file"):
        cifar.extract(tmp_path / "out" / "c.tar.gz", tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["c.tar.gz"]


def test_archives_that_are_not_the_release_are_refused(tmp_path):
    (tmp_path / "a.tar.gz").write_bytes(b"not an archive")
    with pytest.raises(ConfigError, match="a.tar.gz is not a readable tar.gz archive"):
        cifar.extract(tmp_path / "a.tar.gz", tmp_path)
    with tarfile.open(tmp_path / "b.tar.gz", "w:gz"):
        pass
    with pytest.raises(ConfigError, match=r"b.tar.gz lacks cifar-10-batches-bin/data_batch_1.bin, "):
        cifar.extract(tmp_path / "b.tar.gz", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tar.gz", "b.tar.gz"]


def test_a_damaged_extracted_folder_is_refused_naming_the_file(tmp_path):
    cifar_archive(tmp_path / "c.tar.gz", per_batch=2)
    batches = cifar.extract(tmp_path / "c.tar.gz", tmp_path)
    records = bytearray((batches / "test_batch.bin").read_bytes())
    records[3073] = 10  # the second record's label
    (batches / "test_batch.bin").write_bytes(bytes(records))
    with pytest.raises(ConfigError, match=r"test_batch.bin: record 1 has label 10 and "
                                          r"batches.meta.txt names 10 classes"):
        cifar.read(batches)
    (batches / "data_batch_5.bin").unlink()
    with pytest.raises(ConfigError, match="cifar-10-batches-bin lacks data_batch_5.bin; delete"):
        cifar.read(batches)


def _users_file(path, content: bytes) -> tuple:
    """``path`` made a file of the user's with ``content`` and an old mtime; what must stay."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    return _kept(path)


def _kept(path) -> tuple:
    return path.read_bytes(), os.stat(path).st_mtime_ns


def test_a_link_planted_among_the_extracted_batches_is_refused_and_not_read(tmp_path):
    """A batch replaced by a link to a file of the user's (of a size CIFAR-10's records fit,
    so that its bytes would have been read as images) is one line naming it; the file is kept."""
    cifar_archive(tmp_path / "c.tar.gz", per_batch=2)
    batches = cifar.extract(tmp_path / "c.tar.gz", tmp_path)
    secret = tmp_path / "home" / "secret.bin"
    before = _users_file(secret, bytes(range(10)) * (2 * 3073 // 10) + bytes(2 * 3073 % 10))
    (batches / "data_batch_2.bin").unlink()
    (batches / "data_batch_2.bin").symlink_to(secret)
    with pytest.raises(ConfigError) as refused:
        cifar.read(batches)
    assert str(refused.value) == (
        f"{batches / 'data_batch_2.bin'} is a symbolic link: CIFAR-10's batches are read only as "
        "the files extracted from the archive, never through a link; delete the folder to extract "
        "it again from cifar-10-binary.tar.gz, or put the file itself there")
    assert _kept(secret) == before


@pytest.mark.parametrize("planted", ["dangling", "file"])
def test_an_extraction_never_writes_through_a_link_in_its_folder(tmp_path, planted):
    """``cifar-10-batches-bin`` planted as a link (dangling, or to a file of the user's) is
    refused before anything is extracted (it ended in a NotADirectoryError traceback); a
    leftover temporary folder that is a link to a folder of the user's is removed as a link,
    its target's files kept."""
    folder, home = tmp_path / "data", tmp_path / "home"
    folder.mkdir()
    cifar_archive(folder / "c.tar.gz", per_batch=2)
    target = home / "notes.txt"
    before = _users_file(target, b"the user's notes\n") if planted == "file" else None
    if planted == "dangling":
        home.mkdir()
    (folder / "cifar-10-batches-bin").symlink_to(target)
    with pytest.raises(ConfigError) as refused:
        cifar.extract(folder / "c.tar.gz", folder)
    assert str(refused.value) == (f"{folder / 'cifar-10-batches-bin'} is a symbolic link: trainer-run "
                                  "extracts c.tar.gz there only into a folder of its own; remove it "
                                  "and run again")
    assert sorted(p.name for p in folder.iterdir()) == ["c.tar.gz", "cifar-10-batches-bin"]
    assert (_kept(target) if target.exists() else None) == before
    assert sorted(p.name for p in home.iterdir()) == (["notes.txt"] if before else [])
    (folder / "cifar-10-batches-bin").unlink()
    kept = _users_file(home / "mine" / "a.txt", b"mine\n")
    (folder / ".cifar-10-batches-bin.tmp-stale").symlink_to(home / "mine")
    batches = cifar.extract(folder / "c.tar.gz", folder)
    assert sorted(p.name for p in batches.iterdir()) == sorted(cifar.MEMBERS)
    assert _kept(home / "mine" / "a.txt") == kept
