"""Memory-mapped .npy files (data/mapped.py): every read equals numpy.load's; the preparation
rules and the prefetch thread work on them as on arrays in memory; bad files are refused
naming the file; and the map's resident pages stay bounded (measured by the kernel, in
/proc/self/smaps) where without the drops they grow to the whole file."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from trainer_run.data import ArrayDataset, SerialIterator, prepare
from trainer_run.data.mapped import CAN_DROP, open_npy
from trainer_run.data.prefetch import Prefetcher
from trainer_run.errors import ConfigError


def saved(tmp_path, name, array, **kwargs) -> Path:
    path = tmp_path / name
    np.save(path, array, **kwargs)
    return path


ARRAYS = {
    "images": lambda rng: rng.integers(0, 256, size=(37, 5, 6), dtype=np.uint8),
    "float32": lambda rng: rng.normal(size=(41, 7)).astype(np.float32),
    "int64 labels": lambda rng: rng.integers(-5, 5, size=29),
    "strings": lambda rng: np.array(["cat", "dog", "emu"] * 4),
    "fortran": lambda rng: np.asfortranarray(rng.normal(size=(11, 4, 3))),
}


@pytest.mark.parametrize("kind", ARRAYS)
def test_reads_equal_numpy_loads_and_are_arrays_in_memory(tmp_path, kind):
    rng = np.random.default_rng(1)
    path = saved(tmp_path, "a.npy", ARRAYS[kind](rng))
    expected = np.load(path, allow_pickle=False)
    a = open_npy(path)
    assert (len(a), a.shape, a.dtype, a.ndim, a.size, a.nbytes) == (
        len(expected), expected.shape, expected.dtype, expected.ndim, expected.size, expected.nbytes)
    n = len(expected)
    keys = [rng.integers(0, n, size=13), np.array([-1, 0, 1 - n], np.int32), rng.integers(0, n, (2, 3)),
            list(rng.permutation(n)[:5]), slice(2, 9), slice(None, 1),
            slice(1, None, 3), 3, -1, np.int64(4), rng.random(n) < 0.5, (rng.integers(0, n, 4), 0)]
    for key in keys:
        if isinstance(key, tuple) and expected.ndim < 2:
            continue
        got = a[key]
        np.testing.assert_array_equal(got, expected[key], strict=True)
        if isinstance(got, np.ndarray):
            assert got.flags.owndata or got.base is None or not np.may_share_memory(got, a._array)
    with pytest.raises(IndexError):
        a[np.array([n])]
    np.testing.assert_array_equal(np.asarray(a), expected, strict=True)
    if expected.dtype.kind in "iuf":
        np.testing.assert_array_equal(np.asarray(a, dtype=np.float64), expected.astype(np.float64))


def test_reshape_is_a_view_of_the_same_map(tmp_path):
    x = np.random.default_rng(0).integers(0, 256, size=(20, 4, 5), dtype=np.uint8)
    a = open_npy(saved(tmp_path, "x.npy", x))
    b = a.reshape(20, 1, 4, 5)
    assert b.shape == (20, 1, 4, 5) and b.path == a.path and b._mapping is a._mapping
    np.testing.assert_array_equal(b[[3, 1, 3]], x.reshape(20, 1, 4, 5)[[3, 1, 3]], strict=True)
    np.testing.assert_array_equal(a.reshape(-1)[7:30], x.reshape(-1)[7:30], strict=True)


def test_a_format_2_header_is_read(tmp_path):
    x = np.arange(60, dtype=np.int16).reshape(12, 5)
    path = tmp_path / "v2.npy"
    with open(path, "wb") as f:
        np.lib.format.write_array(f, x, version=(2, 0))
    np.testing.assert_array_equal(open_npy(path)[[11, 0]], x[[11, 0]], strict=True)


def test_a_truncated_file_is_refused_naming_it(tmp_path):
    path = saved(tmp_path, "cut.npy", np.zeros((100, 8), np.float32))
    data = path.read_bytes()
    path.write_bytes(data[:-1])
    with pytest.raises(ConfigError, match=rf"^{path} is truncated: its header describes a float32 "
                       rf"array of shape \(100, 8\) \({len(data)} bytes with the header\) and the file "
                       rf"has {len(data) - 1} bytes"):
        open_npy(path)
    path.write_bytes(data[:60])  # inside the header
    with pytest.raises(ConfigError, match=rf"^{path} is not a readable .npy array file"):
        open_npy(path)


def test_objects_are_refused_without_unpickling(tmp_path):
    path = saved(tmp_path, "objects.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(ConfigError, match=rf"^{path} holds Python objects \(object\), which only "
                       "unpickling could read, and trainer-run never unpickles a file"):
        open_npy(path)


def test_the_budget_is_a_whole_number_of_bytes(tmp_path):
    path = saved(tmp_path, "x.npy", np.zeros(3))
    for budget in (0, -5, 1.5, True):
        with pytest.raises(ConfigError, match="^budget must be"):
            open_npy(path, budget=budget)


@pytest.mark.parametrize("content", [b"", b"not an array at all", b"\x93NUMPY\x09\x00junk"])
def test_other_files_are_refused_naming_them(tmp_path, content):
    path = tmp_path / "x.npy"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=f"^{path} is not a readable .npy array file"):
        open_npy(path)
    with pytest.raises(ConfigError, match=f"^cannot read {tmp_path / 'missing.npy'}: "):
        open_npy(tmp_path / "missing.npy")


@pytest.mark.parametrize("normalize", ["unit", "standardize"])
def test_prepared_data_over_mapped_files_equals_it_over_arrays(tmp_path, normalize):
    """prepare's every use of its inputs (len, shape, reshape of (N, H, W), slices, the
    labels as an array, normalization fitted chunk by chunk) on mapped files."""
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, size=(300, 6, 5), dtype=np.uint8)
    y = rng.integers(0, 4, size=300).astype(np.int64)
    mapped = (open_npy(saved(tmp_path, "x.npy", x), budget=4096), open_npy(saved(tmp_path, "y.npy", y)))
    expected = prepare((x, y), np.random.default_rng(9), normalize=normalize)
    got = prepare(mapped, np.random.default_rng(9), normalize=normalize)
    assert (got.in_shape, got.out_size, got.task, got.note) == (
        expected.in_shape, expected.out_size, expected.task, expected.note)
    for split in ("train", "val"):
        want, have = getattr(expected, split), getattr(got, split)
        indices = np.random.default_rng(4).permutation(len(want))
        for a, b in zip(have.take(indices), want.take(indices)):
            np.testing.assert_array_equal(a, b, strict=True)
    assert mapped[0].drops > 0  # the tiny budget made it drop pages along the way


def test_prefetched_batches_over_a_mapped_file_equal_those_over_the_array(tmp_path):
    """The prefetch thread reads the map while this one does too, with drops in between."""
    x = np.random.default_rng(5).integers(0, 256, size=(500, 64), dtype=np.uint8)
    mapped = ArrayDataset(open_npy(saved(tmp_path, "x.npy", x), budget=4096))
    plain = ArrayDataset(x)
    ahead = SerialIterator(mapped, 32, rng=np.random.default_rng(2))
    reference = SerialIterator(plain, 32, rng=np.random.default_rng(2))
    prefetcher = Prefetcher(ahead, mapped.take, 4)
    rng = np.random.default_rng(6)
    try:
        for _ in range(60):
            expected = plain.take(reference.next_indices())
            other = rng.integers(0, len(x), size=32)  # read here, while the thread reads too
            np.testing.assert_array_equal(mapped.take(other)[0], x[other], strict=True)
            np.testing.assert_array_equal(prefetcher.next()[0], expected[0], strict=True)
    finally:
        prefetcher.close()
    assert mapped.arrays[0].drops > 0


# -- resident memory -----------------------------------------------------------------------

def resident_bytes(path: Path) -> int:
    """The bytes of ``path``'s maps resident in this process, as the kernel counts them."""
    total, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(maxsplit=5)
            if len(head) >= 5 and "-" in head[0] and not head[0].endswith(":"):
                inside = len(head) == 6 and head[5].strip() == str(path)
            elif inside and line.startswith("Rss:"):
                total += int(head[1]) * 1024
    return total


def peak_while_reading(path: Path, budget, batches: int = 200) -> tuple[int, int]:
    """The largest resident size of ``path``'s map seen while reading ``batches`` batches of
    1 to 100 random rows (sampled every third batch), and how often its pages were dropped."""
    a = open_npy(path, budget=budget)
    rng = np.random.default_rng(0)
    peak = 0
    for step in range(batches):
        a[np.sort(rng.integers(0, len(a), size=rng.integers(1, 101)))]
        if step % 3 == 0:
            peak = max(peak, resident_bytes(path))
    return peak, a.drops


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux") or not CAN_DROP,
                    reason="reads the kernel's count in /proc/self/smaps; needs madvise")
def test_the_maps_resident_pages_stay_within_the_budget_where_without_drops_they_grow(tmp_path):
    """100 MB of 784-byte rows, 200 random batches of up to 100. Without drops the kernel maps at
    least 64 KiB around every row read (up to a 2 MiB block), so the map comes to hold most of
    the file; with a budget of 16 MiB it stays below the budget between reads."""
    path = saved(tmp_path, "big.npy", np.zeros((128_000, 1, 28, 28), np.uint8))
    size = path.stat().st_size
    unbounded, never = peak_while_reading(path, budget=None)  # its map is closed on return
    budget = 16 << 20
    bounded, drops = peak_while_reading(path, budget=budget)
    assert never == 0 and unbounded > size / 2  # the measurement sees the growth to prevent
    assert 0 < bounded <= budget
    assert drops > 100
