"""The training loop from Python: triggers, extension order, logging, interrupts, resume."""

import json

import numpy as np
import pytest
from helpers import make_synthetic

from tests.training.test_triggers import Counting
from trainer_run import optimizers
from trainer_run.backend import get_backend
from trainer_run.data import SerialIterator
from trainer_run.models import MLP
from trainer_run.storage import checkpoint
from trainer_run.training import AnyOf, IntervalTrigger, StopTrigger, Trainer
from trainer_run.training.extension import PRIORITY_EDITOR
from trainer_run.training.extensions import Evaluator, LogReport, Snapshot, Summary
from trainer_run.updaters import Batches, StandardUpdater


def _trainer(out, max_iterations=40, seed=0, optimizer="adam"):
    """A small run; ``seed`` drives initialisation and shuffling, the data is fixed."""
    backend = get_backend("numpy", seed=seed)
    data = make_synthetic("spirals", 400, 0.25, np.random.default_rng(0))
    model = MLP(data.in_size, data.out_size, backend, hidden_sizes=[16])
    iterator = SerialIterator(data.train, 30, rng=np.random.default_rng(seed + 1))
    opt = optimizers.create(optimizer, learning_rate=0.01)
    updater = StandardUpdater(iterator, opt, model, batches=Batches(backend))
    stop = StopTrigger(max_iterations=max_iterations)
    trainer = Trainer(updater, stop, out=str(out))
    log = LogReport(AnyOf(IntervalTrigger(10), stop), opt)
    trainer.extend(Evaluator(data.val, model, 50, backend), trigger=AnyOf(IntervalTrigger(20), stop))
    trainer.extend(log)
    trainer.extend(Snapshot(), trigger=IntervalTrigger(20))
    trainer.extend(Summary(log, 30, updater.stores["main"]))
    return trainer


def test_log_rows_average_the_iterations_since_the_last_row(tmp_path):
    trainer = _trainer(tmp_path)
    losses = []
    original = trainer.updater.forward

    def spy(arrays, model=None):
        out = original(arrays, model)
        losses.append(float(out["loss"].data))
        return out

    trainer.updater.forward = spy
    trainer.run()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [10, 20, 30, 40]
    for k, row in enumerate(rows):
        assert row["train/loss"] == pytest.approx(np.mean(losses[10 * k:10 * k + 10]), rel=1e-6)
    assert "val/loss" in rows[1] and "val/loss" not in rows[0]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["val/loss"] == rows[-1]["val/loss"]


def test_interrupt_saves_a_checkpoint_and_a_summary(tmp_path):
    trainer = _trainer(tmp_path, max_iterations=100)
    original = trainer.updater.update_core

    def interrupted():
        if trainer.updater.iteration == 25:
            raise KeyboardInterrupt
        original()

    trainer.updater.update_core = interrupted
    trainer.run()
    assert trainer.status == "interrupted"
    assert json.loads((tmp_path / "summary.json").read_text())["status"] == "interrupted"
    assert checkpoint.find(tmp_path).name == "iter_00000025"


def test_failure_is_recorded_and_reraised(tmp_path):
    trainer = _trainer(tmp_path)

    def broken():
        raise RuntimeError("boom")

    trainer.updater.update_core = broken
    with pytest.raises(RuntimeError, match="boom"):
        trainer.run()
    assert json.loads((tmp_path / "summary.json").read_text())["status"] == "failed"


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_restored_state_continues_bit_for_bit(tmp_path, optimizer):
    straight = _trainer(tmp_path / "a", max_iterations=40, optimizer=optimizer)
    straight.run()
    first = _trainer(tmp_path / "b", max_iterations=20, optimizer=optimizer)
    first.run()
    state = checkpoint.load(checkpoint.find(tmp_path / "b"))
    resumed = _trainer(tmp_path / "b", max_iterations=40, seed=7, optimizer=optimizer)
    resumed.load_state_dict(state["trainer"])
    resumed.run()
    for name, p in straight.updater.stores["main"].params.items():
        np.testing.assert_array_equal(p.data, resumed.updater.stores["main"].params[name].data)
    assert resumed.updater.get_optimizer("main").num_update == 40


def test_extensions_share_one_base_and_plain_callables_are_wrapped(tmp_path):
    """An Extension subclass overrides only the hooks it needs; a plain callable keeps its own
    trigger, priority and hooks; the order is by priority, then registration; only
    extensions with a state appear in the checkpoint."""
    from trainer_run.training import PRIORITY_WRITER, Extension

    calls = []

    class Counting(Extension):
        trigger = (10, "iteration")

        def __call__(self, trainer):
            calls.append(("counting", trainer.updater.iteration))

        def state_dict(self):
            return {"calls": sum(1 for who, _ in calls if who == "counting")}

    def early(trainer):
        calls.append(("early", trainer.updater.iteration))

    early.priority = PRIORITY_WRITER
    early.trigger = (20, "iteration")
    early.finalize = lambda trainer: calls.append(("finalized", trainer.updater.iteration))

    trainer = _trainer(tmp_path, max_iterations=20)
    trainer.extend(Counting())
    trainer.extend(early)
    trainer.extend(lambda t: None, name="silent")
    trainer.run()
    assert calls == [("counting", 10), ("early", 20), ("counting", 20), ("finalized", 20)]
    state = trainer.state_dict()["extensions"]
    assert state["Counting"] == {"calls": 2} and "silent" not in state and "early" not in state
    with pytest.raises(TypeError, match="must be callable"):
        trainer.extend(42, name="number")


def _recorder(calls: list, tag: str):
    """A function named ``f`` that records ``(tag, iteration)``: each call makes another one."""
    def f(trainer):
        calls.append((tag, trainer.updater.iteration))
    return f


class _Ticks:
    """A callable object without ``__name__`` (nor a ``name``), with a state."""

    name = None

    def __init__(self):
        self.ticks = 0

    def __call__(self, trainer):
        self.ticks += 1

    def state_dict(self):
        return {"ticks": self.ticks}


def test_extension_names_follow_chainer_a_repeated_name_gets_a_suffix(tmp_path):
    """A function is named by its ``__name__``, a callable object without one by its class;
    a name already taken (given or not) gets ``_1``, ``_2``, ... in registration order, and
    each extension's state is kept under its own name."""
    calls = []
    first, second = _recorder(calls, "first"), _recorder(calls, "second")
    trainer = _trainer(tmp_path, max_iterations=2)
    assert trainer.extend(first) == "f"
    assert trainer.extend(second) == "f_1"
    assert trainer.extend(_Ticks()) == "_Ticks"
    assert trainer.extend(_Ticks(), name="f") == "f_2"
    assert trainer.extend(lambda t: None) == "<lambda>"
    assert trainer.extend(Evaluator([], None, 1)) == "evaluator_1"  # the class's own name
    trainer.get_extension("evaluator_1").evaluate = lambda: {}
    trainer.run()
    assert calls == [("first", 1), ("second", 1), ("first", 2), ("second", 2)]
    assert trainer.get_extension("f").function is first
    assert trainer.get_extension("f_1").function is second
    state = trainer.state_dict()["extensions"]
    assert state["_Ticks"] == {"ticks": 2} and state["f_2"] == {"ticks": 2}


def test_extensions_read_the_trainer_s_observation_not_the_updater_s(tmp_path):
    """The updater's report only starts each iteration's observation: what a writer puts there
    is what the objective and the log read (here the iteration as the ``loss``)."""
    from trainer_run.training import PRIORITY_WRITER
    from trainer_run.training.extensions import Objective

    def iteration_as_loss(trainer):
        trainer.observation["loss"] = float(trainer.updater.iteration)

    trainer = _trainer(tmp_path, max_iterations=20)
    trainer.extend(iteration_as_loss, priority=PRIORITY_WRITER)
    objective = Objective("train/loss", "max", IntervalTrigger(10))
    trainer.extend(objective)
    trainer.run()
    assert (objective.best, objective.best_iteration, objective.final) == (15.5, 20, 15.5)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [row["train/loss"] for row in rows] == [5.5, 15.5]
    assert trainer.updater.observation["loss"] != 20.0


def test_an_observation_s_keys_tell_the_training_step_s_from_a_writer_s():
    from trainer_run.training.trainer import from_update, metric_name

    assert from_update("loss") and not from_update("val/loss")
    assert [metric_name(k) for k in ("loss", "val/loss", "test/accuracy")] == [
        "train/loss", "val/loss", "test/accuracy"]
    with pytest.raises(ValueError, match="prefix must end in '/'"):
        Evaluator([], None, 1, prefix="val")


class _Steps:
    """The updater protocol's least: counts iterations, reports no metrics."""

    def __init__(self):
        self.iteration, self.observation, self.epoch_detail = 0, {}, 0.0

    def update(self):
        self.iteration += 1

    def agree_to_stop(self, signum):
        return signum

    def agree_to_finish(self, asked):
        return asked

    def abort(self, reason):
        pass

    def finalize(self):
        pass

    def settle(self):
        pass


@pytest.mark.parametrize("profiled", [False, True])
def test_an_extension_that_is_off_costs_no_call_and_its_trigger_is_asked_where_it_can_fire(
        tmp_path, monkeypatch, profiled):
    from trainer_run.profiling import Profiler
    from trainer_run.training import extension, triggers

    base = []
    monkeypatch.setattr(extension.Extension, "__call__", lambda self, trainer: base.append(1))

    class Quiet(extension.Extension):  # keeps the base's __call__: only finalizes
        finalized = 0

        def finalize(self, trainer):
            Quiet.finalized += 1

    calls = []
    trainer = Trainer(_Steps(), StopTrigger(max_iterations=1000), out=str(tmp_path),
                      profiler=Profiler() if profiled else None)
    rare = Counting(triggers.AnyOf(IntervalTrigger(250), triggers.STOP_REQUESTED))
    trainer.extend(Quiet())
    trainer.extend(_recorder(calls, "every"))
    trainer.extend(_recorder(calls, "rare"), trigger=rare)
    trainer.run()
    assert base == [] and Quiet.finalized == 1
    assert [i for tag, i in calls if tag == "every"] == list(range(1, 1001))
    assert [i for tag, i in calls if tag == "rare"] == [250, 500, 750, 1000]
    assert rare.asked == [1, 250, 500, 750, 1000]


def test_a_stop_request_has_the_later_extensions_triggers_asked_at_its_iteration(tmp_path):
    from trainer_run.training import triggers

    calls = []

    def editor(trainer):
        if trainer.updater.iteration == 333:
            trainer.request_stop("enough")

    editor.priority = PRIORITY_EDITOR
    trainer = Trainer(_Steps(), StopTrigger(max_iterations=1000), out=str(tmp_path))
    trainer.extend(editor)
    trainer.extend(_recorder(calls, "log"),
                   trigger=triggers.AnyOf(IntervalTrigger(100), triggers.STOP_REQUESTED))
    trainer.run()
    assert calls == [("log", 100), ("log", 200), ("log", 300), ("log", 333)]
    assert trainer.updater.iteration == 333 and trainer.stop_reason == "enough"
