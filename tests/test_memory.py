"""The memory rule (trainer_run.memory): allocations whose size is known in advance (an IDX
header, a synthetic set's size, a model's parameters, a checkpoint's arrays) are refused in
one line before they are made when the machine's available memory cannot hold them. Headers
claim large sizes in small files; nothing large is allocated (the command meeting them:
tests/command/test_memory_limits.py)."""

import gzip
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from trainer_run import memory
from trainer_run.data import synthetic
from trainer_run.data.idx import read_idx
from trainer_run.errors import ConfigError
from trainer_run.layers import Linear
from trainer_run.storage import npz


def test_available_bytes_reads_memavailable_and_check_fits_refuses_beyond_it(monkeypatch):
    available = memory.available_bytes()
    assert available is None or available > 0
    monkeypatch.setattr(memory, "available_bytes", lambda: 3 << 30)
    memory.check_fits(3 << 30, "x", "fix")
    with pytest.raises(ConfigError, match=r"^x needs 3.5 GiB of memory and the machine has 3.0 GiB "
                       r"available; fix$"):
        memory.check_fits((3 << 30) + (1 << 29), "x", "fix")
    monkeypatch.setattr(memory, "available_bytes", lambda: None)
    memory.check_fits(1 << 60, "x", "fix")  # unknown: no check


def _idx_header(code, *dims):
    return bytes([0, 0, code, len(dims)]) + struct.pack(f">{len(dims)}I", *dims)


@pytest.mark.parametrize("gzipped", [True, False])
def test_an_idx_header_claiming_more_than_memory_is_refused_before_reading(tmp_path, gzipped):
    path = tmp_path / "images.idx"
    content = _idx_header(0x0C, 2**31, 28, 28) + bytes(1000)  # int32: read into memory
    path.write_bytes(gzip.compress(content) if gzipped else content)
    words = "needs" if gzipped else "is truncated"  # a raw file must hold what it declares
    with pytest.raises(ConfigError, match=words):
        read_idx(path)
    if gzipped:
        with pytest.raises(ConfigError, match=r"images.idx \(its header declares 2147483648x28x28 "
                           r"int32.*\) needs 6.1 TiB of memory"):
            read_idx(path)


def test_a_gzip_bomb_is_refused_by_its_declared_size_before_inflating(tmp_path, monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: 1 << 20)
    path = tmp_path / "bomb.gz"
    path.write_bytes(gzip.compress(_idx_header(0x08, 4096, 1024) + bytes(4 << 20)))
    with pytest.raises(ConfigError, match="bomb.gz .*4.0 MiB of memory and the machine has 1.0 MiB"):
        read_idx(path)


def test_a_synthetic_size_beyond_memory_is_refused(monkeypatch):
    with pytest.raises(ConfigError, match=r"^size=100000000000 \(100000000000 examples of 3 values\) "
                       r"needs .* TiB of memory.*; lower dataset.size$"):
        synthetic.spirals(10**11, np.random.default_rng(0))
    monkeypatch.setattr(memory, "available_bytes", lambda: 1 << 20)
    for make in (synthetic.blobs, synthetic.regression, synthetic.mnist_like):
        with pytest.raises(ConfigError, match="lower dataset.size"):
            make(1_000_000, np.random.default_rng(0))


class _NoDraws:
    """A backend that fails the test if a parameter is drawn."""

    class rng:
        @staticmethod
        def standard_normal(*args, **kwargs):
            raise AssertionError("the parameter was allocated")


def test_a_layer_too_large_for_memory_is_refused_before_its_parameters_are_drawn(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: 1 << 30)
    with pytest.raises(ConfigError, match=r"^model: a parameter of shape \(100000000, 2\) "
                       r"\(200,000,000 float32 values, with its gradient\) needs 3.7 GiB of memory.*"
                       r"lower the model's sizes \(model.hidden_sizes"):
        Linear(2, 100_000_000, _NoDraws())


def test_an_npz_member_beyond_memory_is_refused_before_it_is_inflated(tmp_path, monkeypatch):
    path = tmp_path / "arrays.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:  # 4 MiB of zeros, compressed
        with archive.open("w.npy", "w") as f:
            np.save(f, np.zeros(1 << 20, np.float32))
    assert path.stat().st_size < 100_000
    np.testing.assert_array_equal(npz.load(path)["w"], np.zeros(1 << 20, np.float32))
    monkeypatch.setattr(memory, "available_bytes", lambda: 1 << 20)
    monkeypatch.setattr(np, "load", None)  # nothing may read it another way
    with pytest.raises(ConfigError, match=r"arrays.npz: member 'w.npy' \(shape \(1048576,\), float32\) "
                       r"needs 4.0 MiB of memory"):
        npz.load(path)


def _with_available(mebibytes: int, code: str) -> str:
    """Python source that runs ``code`` in a process whose machine is said to have
    ``mebibytes`` of memory available."""
    return (f"import sys\nfrom trainer_run import memory\n"
            f"memory.available_bytes = lambda: {mebibytes} << 20\n{code}")


def test_the_data_limit_refuses_an_allocation_beyond_what_is_available_and_restores():
    """``numpy.empty`` of 1 GiB (never touched: nothing is used) fails under a limit of what the
    process holds plus 100 MiB, and succeeds once the limit is restored."""
    code = _with_available(100, (
        "import numpy\nrestore = memory.limit_to_available()\n"
        "try:\n    numpy.empty(1 << 30, numpy.uint8)\n    print('allocated')\n"
        "except MemoryError as e:\n    print('refused:', e)\n"
        "restore()\nnumpy.empty(1 << 30, numpy.uint8)\nprint('after restore: allocated')\n"))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.splitlines() == [
        "refused: Unable to allocate 1.00 GiB for an array with shape (1073741824,) and data type uint8",
        "after restore: allocated"], result.stderr


FAULTS = """
import resource, sys, numpy
from trainer_run import memory
kept = memory.reuse_freed_blocks() if sys.argv[1] == "reuse" else None
def allocate():
    a = numpy.ones(1 << 26, numpy.float32)  # 256 MiB, every page touched
    del a
allocate()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    allocate()
print(kept, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 3)
"""


def test_freed_blocks_are_reused_without_faulting_their_pages_in_again():
    """After reuse_freed_blocks, a 256 MiB array allocated again after being freed takes no new
    pages from the kernel; without it every allocation faults its pages in again (at least one
    fault per 2 MiB huge page)."""
    runs = {mode: subprocess.run([sys.executable, "-c", FAULTS, mode], capture_output=True, text=True,
                                 check=True).stdout.split() for mode in ("reuse", "default")}
    assert runs["reuse"][0] == "True"
    assert float(runs["reuse"][1]) < 16
    assert float(runs["default"][1]) >= 128
