"""model.freeze, model.lr_mult and model.wd_mult (models/parameter_rules.py): patterns matched
against paths and layers; frozen parameters bit-identical through training (with weight decay
and momentum that would move them) while the others move; multipliers giving MXNet's SGD step
computed by hand; bad patterns refused in one line; a run with them lists them, resumes bit for
bit, and init_from keeps the source's model under the command's rules."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import load_npz, make_synthetic

import trainer_run
from trainer_run import kvstore as kvstores
from trainer_run import optimizers
from trainer_run.backend import Backend
from trainer_run.data import SerialIterator
from trainer_run.errors import ConfigError
from trainer_run.models import MLP, parameter_rules
from trainer_run.module import Module
from trainer_run.optimizers import get_updater
from trainer_run.params import Parameter, ParamStore
from trainer_run.updaters import ParallelUpdater, StandardUpdater, updater_of


def _mlp(seed=0):
    return MLP(2, 2, Backend("numpy", seed=seed), hidden_sizes=[4, 4])  # l1, l2, l3: W and b


def _state(model) -> dict:
    return {path: (p.requires_grad, p.lr_mult, p.wd_mult) for path, p in model.params().items()}


def test_a_pattern_matches_a_path_or_a_layer_on_it_and_the_last_multiplier_wins():
    model = _mlp()
    parameter_rules.apply(model, {"freeze": ["l1"], "lr_mult": {"l*": 10, "l3/*": 2},
                                  "wd_mult": {"*/b": 0}})
    assert _state(model) == {
        "l1/W": (False, 10.0, 1.0), "l1/b": (False, 10.0, 0.0),
        "l2/W": (True, 10.0, 1.0), "l2/b": (True, 10.0, 0.0),
        "l3/W": (True, 2.0, 1.0), "l3/b": (True, 2.0, 0.0),
    }
    nested = type("Nested", (Module,), {})()
    nested.block = Module()
    nested.block.bn = Module()
    nested.block.bn.gamma = Parameter(np.ones(3, "float32"))
    nested.head = Parameter(np.ones(3, "float32"))
    parameter_rules.apply(nested, {"freeze": "*bn"})  # a plain string is one pattern
    assert [p.requires_grad for p in nested.params().values()] == [False, True]


@pytest.mark.parametrize("section, line", [
    ({"freeze": ["conv9"]}, "model.freeze: 'conv9' matches no parameter; the model's parameters "
                            "are l1/W, l1/b, l2/W, l2/b, l3/W, l3/b (a pattern matches"),
    ({"freeze": ["l*"]}, "model.freeze freezes every parameter of the model (6), which leaves "
                         "nothing to train"),
    ({"freeze": [1]}, "model.freeze must be a list of parameter name patterns"),
    ({"lr_mult": {"fc*": 10}}, "model.lr_mult: 'fc*' matches no parameter"),
    ({"lr_mult": 3}, "model.lr_mult must be a mapping from parameter name pattern to multiplier"),
    ({"wd_mult": {"l1": -1}}, "model.wd_mult: 'l1' must map to a number >= 0, got -1"),
    ({"wd_mult": {"l1": True}}, "model.wd_mult: 'l1' must map to a number >= 0, got True"),
    ({"freeze": ["l1"], "wd_mult": {"l9": 0}}, "model.wd_mult: 'l9' matches no parameter"),
])
def test_bad_rules_are_refused_in_one_line_and_nothing_is_set(section, line):
    model = _mlp()
    before = _state(model)
    with pytest.raises(ConfigError) as raised:
        parameter_rules.apply(model, section)
    assert str(raised.value).startswith(line) and "\n" not in str(raised.value)
    assert _state(model) == before


def test_many_parameters_are_listed_up_to_a_count():
    model = MLP(2, 2, Backend("numpy", seed=0), hidden_sizes=[4] * 6)  # 14 parameters
    with pytest.raises(ConfigError, match=r"l4/b, \.\.\. \(14 in all\) \(a pattern"):
        parameter_rules.apply(model, {"freeze": ["x"]})


def _updater(cls=StandardUpdater, rules=None, **kwargs):
    backend = Backend("numpy", seed=3)
    data = make_synthetic("spirals", 400, 0.25, np.random.default_rng(0))
    model = MLP(data.in_size, data.out_size, backend, hidden_sizes=[16, 16])
    parameter_rules.apply(model, rules or {"freeze": ["l1"]})
    iterator = SerialIterator(data.train, 40, rng=np.random.default_rng(7))
    opt = optimizers.create("sgd", learning_rate=0.1, momentum=0.9, wd=0.01)
    return updater_of(cls, iterator, opt, model, backend=backend, **kwargs)


def test_frozen_parameters_stay_bit_identical_while_the_others_move():
    """SGD with momentum 0.9 and weight decay 0.01 would move every parameter, even one whose
    gradient is 0; the frozen ones get no gradient, no optimizer state and no step."""
    updater = _updater()
    before = {k: p.data.copy() for k, p in updater.get_model().params().items()}
    for _ in range(5):
        updater.update()
    after = {k: p.data for k, p in updater.get_model().params().items()}
    for path in before:
        frozen = path.startswith("l1/")
        assert np.array_equal(after[path], before[path]) is frozen, path
    store = updater.stores["main"]
    assert list(store.frozen) == ["l1/W", "l1/b"]
    assert all(p.grad is None for p in store.frozen.values())  # never computed
    assert list(updater.state_dict()["optimizer_states"]["main"]) == ["2", "3", "4", "5"]  # none for l1
    assert store.size == sum(p.data.size for k, p in store.params.items() if k not in store.frozen)


def test_parallel_replicas_get_the_frozen_values_of_a_loaded_state():
    updater = _updater(ParallelUpdater, devices=2, kvstore=kvstores.create("local"))
    try:
        state = updater.state_dict()
        state["models"]["main"]["l1/W"] = state["models"]["main"]["l1/W"] + 1.0
        updater.load_state_dict(state)
        replica = updater.replica_stores[1]
        np.testing.assert_array_equal(replica.frozen["l1/W"].data, state["models"]["main"]["l1/W"])
        assert len(replica.groups) == len(updater.stores["main"].groups)  # no kvstore key for them
    finally:
        updater.finalize()


def test_multipliers_give_the_seeds_sgd_step_computed_by_hand():
    """MXNet 1.9's SGD: weight -= lr * (grad + wd * weight), with lr = lr * lr_mult and
    wd = wd * wd_mult of the parameter (Optimizer._get_lr, _get_wd)."""
    rng = np.random.default_rng(4)
    net = Module()
    net.fc1, net.out = Module(), Module()
    net.fc1.W, net.fc1.b = (Parameter(rng.normal(size=s).astype("float32")) for s in [(3, 2), 3])
    net.out.W, net.out.b = (Parameter(rng.normal(size=s).astype("float32")) for s in [(1, 3), 1])
    parameter_rules.apply(net, {"lr_mult": {"fc*": 10}, "wd_mult": {"*/b": 0, "out/b": 0.5}})
    start = {k: p.data.astype("float64") for k, p in net.params().items()}
    grads = {k: rng.normal(size=p.data.shape).astype("float32") for k, p in net.params().items()}
    store = ParamStore(net.params())
    applier = get_updater(optimizers.create("sgd", learning_rate=0.5, wd=0.1))
    applier.attach(store)
    for k, p in net.params().items():
        p.grad[...] = grads[k]
    applier.step()
    lr_mult = {"fc1/W": 10, "fc1/b": 10, "out/W": 1, "out/b": 1}
    wd_mult = {"fc1/W": 1, "fc1/b": 0, "out/W": 1, "out/b": 0.5}
    for k, p in net.params().items():
        hand = start[k] - 0.5 * lr_mult[k] * (grads[k] + 0.1 * wd_mult[k] * start[k])
        np.testing.assert_allclose(p.data, hand, rtol=1e-6, atol=1e-7, err_msg=k)


RUN = ["optimizer=sgd", "optimizer.learning_rate=0.1", "optimizer.momentum=0.9", "optimizer.wd=0.01",
       "model.hidden_sizes=[8]", "dataset.size=400", "trainer.checkpoint_interval=10",
       "trainer.eval_interval=10", "model.freeze=[l1]", "model.lr_mult={l2: 3}",
       "model.wd_mult={*/b: 0}"]


def test_a_run_lists_its_rules_resumes_bit_for_bit_and_fine_tunes_the_sources_model(tmp_path,
                                                                                 capsys):
    # the starting weights (init_from an .npz outside any run: the command's model)
    start = {k: p.data for k, p in MLP(2, 2, Backend("numpy", seed=9), hidden_sizes=[8]).params().items()}
    np.savez(tmp_path / "start.npz", **start)
    common = [*RUN, f"init_from={tmp_path / 'start.npz'}"]
    straight = trainer_run.train([*common, "trainer.max_iterations=20"], run_dir=tmp_path / "a")
    split = trainer_run.train([*common, "trainer.max_iterations=10"], run_dir=tmp_path / "b")
    trainer_run.resume(split.dir, ["trainer.max_iterations=20"])
    assert (straight.dir / "model.npz").read_bytes() == (split.dir / "model.npz").read_bytes()
    trained = load_npz(straight.dir / "model.npz")
    for path in start:
        assert np.array_equal(trained[path], start[path]) is path.startswith("l1/"), path
    model = straight.summary["model"]
    assert (model["frozen"], model["trained"]) == (["l1/W", "l1/b"], 8 * 2 + 2)
    assert model["lr_mult"] == {"l2/W": 3.0, "l2/b": 3.0} and model["wd_mult"] == {"l2/b": 0.0}
    assert model["training"] == {"l1": "frozen", "l2": "W lr_mult=3, b lr_mult=3 wd_mult=0"}
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert ["l1", "24", "frozen"] in rows and ["total", "42", "(168", "bytes)", "18", "trained"] in rows
    # init_from a run: its model (hidden [8], not the default [64, 64]), the command's rules
    tuned = trainer_run.train([f"init_from={straight.dir}", "model.freeze=[l2]",
                               "trainer.max_iterations=2", "dataset.size=400"], run_dir=tmp_path / "c")
    assert tuned.summary["model"]["frozen"] == ["l2/W", "l2/b"]
    assert tuned.summary["model"]["layers"] == {"l1": 24, "l2": 18}
