"""The MPI kvstores' types (kvstore/dist.py) without MPI: a missing mpi4py and bad arguments
are ConfigErrors before MPI starts. Their tests across processes are in test_dist_sync.py and
test_worker.py: each ``mpi`` test launches ``mpiexec`` on a script in ``tests/mpi/``; every rank
writes what it saw to ``rank<r>.npz`` and the test checks the files. Run them with
``pytest -m mpi``; they skip when mpi4py or an ``mpiexec`` that starts its MPI is missing.
"""

import sys

import pytest

from trainer_run.errors import ConfigError
from trainer_run.kvstore import dist


# -- without MPI ----------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [dist.DistSyncKVStore, dist.DistDeviceSyncKVStore, dist.DistAsyncKVStore])
def test_missing_mpi4py_is_a_config_error(cls, monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import mpi4py now raises ImportError
    with pytest.raises(ConfigError) as e:
        cls()
    assert str(e.value) == (f"kvstore={cls.type} needs mpi4py and an MPI; install them with "
                            f"pip install 'trainer-run[mpi]'")


def test_bad_arguments_before_mpi(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    with pytest.raises(ConfigError, match="kvstore timeout must be > 0, got 0"):
        dist.DistSyncKVStore(timeout=0)
    with pytest.raises(ConfigError, match="kvstore timeout must be a number, got 'long'"):
        dist.DistAsyncKVStore(timeout="long")
    with pytest.raises(ConfigError, match="kvstore cuda_aware must be true, false or null"):
        dist.DistDeviceSyncKVStore(cuda_aware="yes")


def test_types():
    assert {name: cls.type for name, cls in dist.TYPES.items()} == {
        "dist_sync": "dist_sync", "dist_device_sync": "dist_device_sync", "dist_async": "dist_async"}


# -- dist_sync, dist_device_sync ------------------------------------------------------------


# -- dist_async -----------------------------------------------------------------------------
