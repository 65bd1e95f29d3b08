"""A trainer's kvstore settings (kvstore/request.py): the section a ``kvstore`` option's
``_target_`` builds, checked by name, through MXNet's rules to a store; and the type names,
kept in one place (kvstore/__init__.py)."""

import numpy
import pytest

from trainer_run import kvstore
from trainer_run.errors import ConfigError
from trainer_run.kvstore import dist, trainer_rules
from trainer_run.kvstore.request import KVStoreRequest
from trainer_run.kvstore.trainer_rules import Decision


def test_every_list_of_types_is_the_packages():
    assert kvstore.TYPES == (*kvstore.LOCAL_TYPES, *kvstore.DIST_TYPES)
    assert trainer_rules.TYPES is kvstore.TYPES
    assert tuple(dist.TYPES) == kvstore.DIST_TYPES
    assert all(cls.type == name for name, cls in dist.TYPES.items())
    assert all(kvstore.create(name).type == name for name in kvstore.LOCAL_TYPES)
    assert [kvstore.is_dist(name) for name in ("dist_sync", "Dist_Async", "device", None)] == [
        True, True, False, False]


@pytest.mark.parametrize("kwargs, message", [
    (dict(type="nccl"), "type='nccl' is unknown; choose none or one of local, device, dist_sync, "
                        "dist_device_sync, dist_async"),
    (dict(type=3), "type=3 is unknown"),
    (dict(type="device", compression={"type": "1bit"}),
     "compression.type='1bit' is unknown; choose 2bit (MXNet 1.9's 2-bit gradient compression) "
     "or null (none)"),
    (dict(type="device", compression={"type": "2bit", "threshold": 0}),
     "compression.threshold must be > 0 and finite as a float32"),
    (dict(type="device", compression={"kind": "2bit"}),
     "compression.kind is not a setting of gradient compression; they are type and threshold"),
    (dict(type="dist_sync", timeout=0), "timeout must be > 0, got 0"),
    (dict(type="dist_sync", timeout=None), "timeout must be a number, got None"),
])
def test_bad_settings_are_refused_naming_the_argument(kwargs, message):
    with pytest.raises(ConfigError) as info:
        KVStoreRequest(**kwargs)
    assert str(info.value).startswith(message)


def test_one_replica_in_one_process_gets_no_store():
    request = KVStoreRequest("device", compression={"type": "2bit"})
    decision = request.decide(num_devices=1)
    assert decision == Decision(None, False) and request.create(decision) is None
    assert KVStoreRequest("none").type is None
    assert KVStoreRequest("None").decide(num_devices=4) == Decision(None, False)


def test_mxnets_rules_decide_and_the_store_compresses():
    request = KVStoreRequest("Device", compression={"type": "2bit", "threshold": 0.5})
    assert request.compression == {"type": "2bit", "threshold": 0.5}
    assert request.decide(num_devices=2, environ={"MXNET_UPDATE_ON_KVSTORE": "0"}) == \
        Decision("device", False)
    store = request.create(request.decide(num_devices=2, environ={}))
    assert store.type == "device"
    store.init(0, numpy.zeros(4, numpy.float32))
    store.push(0, numpy.array([0.7, 0.1, -0.8, 0.2], numpy.float32))
    out = numpy.empty(4, numpy.float32)
    store.pull(0, out=out)
    numpy.testing.assert_array_equal(out, [0.5, 0.0, -0.5, 0.0])  # 2-bit: +t, 0 or -t


def test_the_rules_errors_keep_mxnets_wording():
    with pytest.raises(ConfigError, match=r"^Please set kvstore.update_on_kvstore=true"):
        KVStoreRequest("dist_async", update_on_kvstore=False).decide()
