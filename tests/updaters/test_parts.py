"""An updater's parts from plain values (updaters/parts.py): which sync object and which verdict
each kvstore and backend get, the refusals, and an updater made from values equal to one given
its parts."""

from __future__ import annotations

import numpy as np
import pytest

from tests.updaters.test_updaters import DATA, assert_params_close, run
from trainer_run import kvstore as kvstores
from trainer_run import optimizers
from trainer_run.backend import Backend
from trainer_run.data import SerialIterator
from trainer_run.errors import ConfigError
from trainer_run.loss_scaling import LossScaler
from trainer_run.models import MLP
from trainer_run.updaters import (
    Batches,
    GradientSync,
    ServerSync,
    StandardUpdater,
    Sync,
    Verdict,
    parts_of,
    updater_of,
)
from trainer_run.updaters.device_verdict import DeviceVerdict
from trainer_run.updaters.divergence import NanPolicy


def test_each_kvstore_and_backend_get_their_sync_and_verdict():
    deferred = Backend("numpy", seed=0, deferred=True)
    local = kvstores.create("local")
    chosen = {
        "none": parts_of(),
        "local": parts_of(kvstore=local),
        "async": parts_of(deferred, kvstore=local, asynchronous=True),
        "deferred": parts_of(deferred),
    }
    assert {k: (type(p["sync"]), type(p["verdict"])) for k, p in chosen.items()} == {
        "none": (Sync, Verdict), "local": (GradientSync, Verdict),
        "async": (ServerSync, Verdict),  # the server applies the step: the host decides at once
        "deferred": (Sync, DeviceVerdict)}
    assert chosen["local"]["sync"].kvstore is local
    assert chosen["deferred"]["batches"].backend is deferred


@pytest.mark.parametrize("values, message", [
    ({"asynchronous": True}, "asynchronous updates are a dist_async kvstore's; this updater has "
                             "no kvstore"),
    ({"kvstore": "server", "asynchronous": True, "clip_global_norm": 1.0},
     "clip_global_norm needs every gradient of an update at once"),
    ({"nan_policy": "ignore"}, "nan_policy='ignore' is unknown; choose one of stop, skip"),
    ({"accum_grad": 0}, "accum_grad must be >= 1, got 0"),
])
def test_bad_values_are_refused_by_name(values, message):
    with pytest.raises(ConfigError) as e:
        parts_of(**values)
    assert str(e.value).startswith(message)


def _parts(seed=3):
    backend = Backend("numpy", seed=seed)
    model = MLP(DATA.in_size, DATA.out_size, backend, hidden_sizes=[16])
    iterator = SerialIterator(DATA.train, 50, rng=np.random.default_rng(7))
    return iterator, optimizers.create("sgd", learning_rate=0.1, momentum=0.9), model, backend


def test_an_updater_of_values_equals_one_given_its_parts_built():
    iterator, opt, model, backend = _parts()
    given = StandardUpdater(iterator, opt, model, batches=Batches(backend, accum_grad=2),
                            verdict=Verdict(NanPolicy("skip"), LossScaler(8.0)))
    iterator, opt, model, backend = _parts()
    made = updater_of(StandardUpdater, iterator, opt, model, backend=backend, accum_grad=2,
                      nan_policy="skip", loss_scaler=LossScaler(8.0))
    assert made.readings() == given.readings() == {"loss_scale": 8.0, "skipped_steps": 0}
    assert_params_close(run(made, 3), run(given, 3), rtol=0, atol=0)
