"""MXNet's rules from a trainer's kvstore settings to a store (kvstore/trainer_rules.py): which store,
whether it updates, on which devices, and the settings it refuses."""

import pytest

from trainer_run.errors import ConfigError
from trainer_run.kvstore import trainer_rules

BIG = trainer_rules.BIG_ARRAY + 1


@pytest.mark.parametrize("kvstore_name, devices, update, env, size, expected", [
    (None, 4, True, None, 0, (None, False)),                       # no kvstore: update locally
    ("none", 4, None, None, 0, (None, False)),
    ("local", 1, True, None, 0, (None, False)),                    # one device: no store
    ("device", 1, None, None, 0, (None, False)),
    ("device", 2, None, None, 0, ("device", True)),                # MXNET_UPDATE_ON_KVSTORE=1
    ("device", 2, None, "0", 0, ("device", False)),
    ("local", 2, None, None, BIG, ("local", False)),               # > 16 Mi elements on local
    ("device", 2, None, None, BIG, ("device", True)),              # ... only on local
    ("local", 2, True, None, BIG, ("local", True)),                # the config wins
    ("device", 2, False, None, 0, ("device", False)),
    ("local", 2, True, "0", 0, ("local", True)),                   # the env var is ignored
    ("dist_sync", 1, None, None, 0, ("dist_sync", True)),          # dist: a store on one device
    ("dist_device_sync", 2, None, "0", 0, ("dist_device_sync", False)),
    ("dist_sync", 1, False, None, BIG, ("dist_sync", False)),
    ("dist_async", 1, None, "0", 0, ("dist_async", True)),         # async: always on the store
    ("dist_async", 2, True, None, 0, ("dist_async", True)),
    ("Dist_Async", 1, None, None, 0, ("dist_async", True)),
])
def test_trainer_rules(kvstore_name, devices, update, env, size, expected):
    environ = {} if env is None else {"MXNET_UPDATE_ON_KVSTORE": env}
    assert trainer_rules.decide(kvstore_name, update, num_devices=devices, max_param_size=size,
                                environ=environ) == expected


@pytest.mark.parametrize("kwargs, message", [
    (dict(kvstore="dist_async", update_on_kvstore=False),
     r"Please set kvstore.update_on_kvstore=true \(or leave it unset\) when training in async mode"),
    (dict(kvstore=3), "kvstore must be KVStore, str or None, got 3"),
    (dict(kvstore="nccl"), "kvstore='nccl' is unknown; choose none or one of local, device, "),
    (dict(kvstore="local", update_on_kvstore=1), "kvstore.update_on_kvstore must be true, false or null"),
    (dict(kvstore="local", num_devices=0), "number of devices must be an integer >= 1"),
    (dict(kvstore=None, environ={"MXNET_UPDATE_ON_KVSTORE": "yes"}),
     "MXNET_UPDATE_ON_KVSTORE='yes' must be an integer"),
])
def test_trainer_rules_errors(kwargs, message):
    kwargs.setdefault("environ", {})
    with pytest.raises(ConfigError, match=message):
        trainer_rules.decide(**kwargs)
