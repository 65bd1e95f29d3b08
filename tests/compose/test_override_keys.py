"""The keys given on the command line (compose/override_keys.py, through schema.check_overrides): a
misspelt key is refused with a suggestion, the keys of the selected config pass, a key of another
option names the options that have it, a key close to nothing lists its section's keys, and a resume
checks keys against the run's own choices."""

from __future__ import annotations

import pytest

from tests.compose.test_schema import _refused
from trainer_run.compose import schema
from trainer_run.storage import checkpoint


@pytest.mark.parametrize("argv, expected", [
    (["trainer.max_iteration=5"], "trainer.max_iterations"),
    (["trainer.log_intervl=10"], "trainer.log_interval"),
    (["optimizer.learnig_rate=0.1"], "optimizer.learning_rate"),
    (["optimzer.learning_rate=0.1"], "optimizer.learning_rate"),
    (["optimizer=sgd", "optimizer.momentun=0.9"], "optimizer.momentum"),
    (["optimizer=rmsprop", "optimizer.gama1=0.8"], "optimizer.gamma1"),
    (["optimizer=lbsgd", "optimizer.warmup_strategie=sqrt"], "optimizer.warmup_strategy"),
    (["updater.callbacks.update_on_finsh=m.f"], "updater.callbacks.update_on_finish"),
    (["updater.calbacks.update_on_finish=m.f"], "updater.callbacks.update_on_finish"),
    (["updater=parallel", "updater.device=2"], "updater.devices"),
    (["loss_scale=dynamic", "loss_scale.scalling_factor=4"], "loss_scale.scaling_factor"),
    (["precision=fp16", "loss_scale.intervall=10"], "loss_scale.interval"),
    (["scheduler=plateau", "scheduler.patiance=3"], "scheduler.patience"),
    (["dataset=blobs", "dataset.n_clases=4"], "dataset.n_classes"),
    (["model.hiden_sizes=[8]"], "model.hidden_sizes"),
    (["backend.devise=1"], "backend.device"),
    (["-m", "optimizer=adam,sgd", "optimizer.momentun=0.9"], "optimizer.momentum"),
    (["-m", "scheduler=cosine,factor", "scheduler.stepp=100"], "scheduler.step"),
    (["sed=1"], "seed"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_a_misspelt_key_is_refused_with_a_suggestion(argv, expected):
    key = argv[-1].split("=", 1)[0]
    assert _refused(schema.check_overrides, argv) == (
        f"{key} is not a config key; did you mean {expected}?")


@pytest.mark.parametrize("argv", [
    ["trainer.max_iterations=5", "optimizer.learning_rate=0.1", "seed=3"],
    ["optimizer=sgd", "optimizer.momentum=0.9"],
    ["-m", "optimizer=adam,sgd", "optimizer.momentum=0.9", "optimizer.beta1=0.8"],
    ["-m", "optimizer=choice(adam,nag)", "optimizer.momentum=0.9"],
    ["optimizer='sgd'", "optimizer.momentum=0.9"],
    ["precision=fp16", "loss_scale.scale=16"],
    ["updater=parallel", "updater.devices=[0,0]", "updater.accum_grad=2"],
    ["updater.callbacks.update_on_finish=m.f", "updater.callbacks.forward_on_start=[m.g]"],
    ["updater.callbacks=null"],
    ["model.hidden_sizes.0=32", "model.hidden_sizes=[8,8]"],
    ["+optimizer.nosuch=1", "++trainer.foo=2", "~trainer.max_epochs", "+model.zzz=3"],
    ["hydra.run.dir=out", "hydra/job_logging=none", "hydra.job.chdir=true"],
    ["--cfg", "job", "-c", "hydra", "--info", "config", "resume=null"],
    ["--config-name=other", "nosuch.key=1"],  # another primary config: left to Hydra
    ["scheduler=cosine", "scheduler.max_update=100", "scheduler.final_lr=1e-5"],
    ["trainer=default", "kvstore=local", "backend=numpy", "backend.device=0"],
], ids=lambda v: " ".join(v))
def test_keys_of_the_selected_config_and_other_arguments_pass(argv):
    schema.check_overrides(argv)


def test_a_key_of_another_option_names_the_options_that_have_it():
    message = _refused(schema.check_overrides, ["optimizer.momentum=0.9"])
    assert message.startswith("optimizer.momentum is not a config key with optimizer=adam; "
                              "these optimizer options have it: ")
    assert {"sgd", "nag", "signum"} <= set(message.split(": ")[1].split(", "))
    assert _refused(schema.check_overrides, ["loss_scale.scale=8"]) == (
        "loss_scale.scale is not a config key with loss_scale=none; these loss_scale options "
        "have it: dynamic, static")


@pytest.mark.parametrize("argument, message", [
    ("trainer.zzz=1", "trainer.zzz is not a config key; trainer has max_iterations, max_epochs, "),
    ("model.zzz=3", "model.zzz is not a config key; model has freeze, lr_mult, wd_mult, _target_, "
                    "hidden_sizes, activation (an argument of a user _target_ is added with "
                    "+model.zzz=...)"),
    ("model.depth=3", "model.depth is not a config key with model=mlp; these model options have it: "
                      "resnet"),
    ("zzz=1", "zzz is not a config key; the config has backend, model, dataset, "),
    ("optimizer.learning_rate.x=1",
     "optimizer.learning_rate.x is not a config key; optimizer.learning_rate is a value"),
])
def test_a_key_close_to_nothing_lists_the_keys_of_its_section(argument, message):
    assert _refused(schema.check_overrides, [argument]).startswith(message)


def _saved_run(tmp_path, choices: dict):
    run = tmp_path / "run"
    checkpoint.save({"choices": choices, "config": {}}, run / "checkpoints", 10)
    return run


@pytest.mark.parametrize("quote", ["", "'"])
def test_resume_checks_keys_against_the_runs_own_choices(tmp_path, quote):
    run = _saved_run(tmp_path, {"optimizer": "sgd", "loss_scale": "dynamic"})
    resume = f"resume={quote}{run}{quote}"
    schema.check_overrides([resume, "optimizer.momentum=0.5", "loss_scale.interval=10"])
    assert _refused(schema.check_overrides, [resume, "optimizer.momentun=0.5"]) == (
        "optimizer.momentun is not a config key; did you mean optimizer.momentum?")


def test_an_unreadable_resume_is_left_to_prepare(tmp_path):
    # prepare() reports the missing run itself, right after the key check
    schema.check_overrides([f"resume={tmp_path / 'nosuch'}", "optimizer.momentum=0.5"])
