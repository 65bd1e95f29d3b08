"""A run folder from anyone cannot exhaust memory or time (issue 36, item 4).

Every file read from a run is read as a regular file (not a link, FIFO or device) of at most
the size its kind may have (:mod:`trainer_run.storage.reading`), and YAML read from a run is
refused at its first alias, before anything is expanded (``RunLoader``). The commands on a
run folder prepared as an adversary would: tests/command/test_bounded_reads.py.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
import yaml
from numpy.lib import format as npy

from trainer_run.storage import npz, yaml_files

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def laughs(merge: bool = False) -> str:
    """About 2.4 kB of YAML whose aliases expand to 10^17 strings ("billion laughs"): nine
    references per level, seventeen levels; with ``merge`` the levels are mappings merged
    with ``<<: *name``."""
    lines = ["a: &a {%s}" % ", ".join(f"k{i}: x" for i in range(9)) if merge else
             "a: &a [x, x, x, x, x, x, x, x, x]"]
    previous = "a"
    for name in "bcdefghijklmnopq":
        if merge:
            lines.append(f"{name}: &{name} {{<<: [{', '.join(['*' + previous] * 9)}], {name}: 1}}")
        else:
            lines.append(f"{name}: &{name} [{', '.join(['*' + previous] * 9)}]")
        previous = name
    lines.append(f"model: {{_target_: trainer_run.models.MLP, hidden_sizes: *{previous}}}")
    return "\n".join(lines) + "\n"


def test_every_alias_form_is_refused_and_plain_yaml_reads_as_before():
    for text in ("a: &x [1]\nb: *x\n", "a: &x {q: 1}\nb: {<<: *x}\n", "a: &x [*x]\n",
                 laughs(), laughs(merge=True)):
        with pytest.raises(yaml.YAMLError, match="alias"):
            yaml_files.load_run(text.encode(), "config.yaml")
    text = "a: 1e-8\nb: [1, {c: d}]\nc: &anchored 2\nd: ${a}\n"
    assert yaml_files.load_run(text.encode(), "x") == yaml.load(text, Loader=yaml_files.Loader)


def test_our_config_files_use_no_alias():
    """What the run records comes from these files, and a recorded config is read refusing
    aliases: none of them may use one."""
    found = sorted(CONFIGS.rglob("*.yaml"))
    assert len(found) > 50
    for path in found:
        yaml_files.load_run(path.read_bytes(), str(path))


def test_the_limits_name_the_file_and_the_limit(tmp_path):
    from trainer_run.storage import reading

    path = tmp_path / "config.yaml"
    with open(path, "wb") as f:
        f.truncate(reading.CONFIG_BYTES + 1)
    with pytest.raises(reading.TooLarge, match=f"{path} holds {reading.CONFIG_BYTES + 1} bytes, "
                                               "more than the 16 MiB"):
        yaml_files.read_run(path)
    path.write_text("a: 1\n")
    assert yaml_files.read_run(path) == {"a": 1}


def test_an_npz_member_declaring_more_than_its_archive_holds_is_refused_from_the_directory(tmp_path):
    """A member whose ``.npy`` header and zip entry both declare 2 GiB of data, stored in a
    few kB: refused from the zip directory alone, before a byte of it is inflated."""
    path = tmp_path / "model.npz"
    count = (1 << 29) - 64
    header = io.BytesIO()
    npy.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (count,)})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("w.npy", header.getvalue() + bytes(1 << 20))
    data = bytearray(path.read_bytes())
    central = data.rindex(b"PK\x01\x02")  # the member's entry in the zip directory
    data[central + 24: central + 28] = (len(header.getvalue()) + count * 4).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"member 'w.npy' declares 2147483\d+ bytes of data"):
        npz.members(path)
