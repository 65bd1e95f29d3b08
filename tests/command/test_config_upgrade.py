"""A run saved before the runner's groups named their callable with ``_target_``
(config_upgrade.py), resumed with ``trainer-run resume=``: it continues bit for bit, saves its
config anew in today's form, and its model loads in the dtype it trained in."""

from __future__ import annotations

import json
import shutil

import numpy
import yaml
from helpers import load_npz, read_jsonl, run_cli

from tests.test_config_upgrade import NEW, OLD, SAVED, UPGRADED
from trainer_run import load_model
from trainer_run.storage import checkpoint

COMMON = ("precision=fp16", "updater=parallel", "updater.devices=2", "kvstore=local",
          "loss_scale.scale=1e30", "optimizer=sgd", "trainer.checkpoint_interval=10",
          "trainer.log_interval=5", "trainer.progress=false")


def _train(out, *args):
    result = run_cli(f"hydra.run.dir={out}", *COMMON, *args)
    assert result.returncode == 0, result.stderr


def _make_old(run):
    """Rewrites the run's checkpoint and ``.hydra/config.yaml`` into the old form."""
    found = checkpoint.find(run)
    state = checkpoint.load(found)
    assert {k: state["config"][k] for k in NEW} == SAVED  # what the old form stands for
    state["config"] = {**{k: v for k, v in state["config"].items() if k not in NEW}, **OLD}
    shutil.rmtree(found)
    checkpoint.save(state, found.parent, int(found.name.removeprefix(checkpoint.PREFIX)))
    record = run / ".hydra" / "config.yaml"
    config = yaml.safe_load(record.read_text())
    record.write_text(yaml.safe_dump({**{k: v for k, v in config.items() if k not in NEW}, **OLD}))


def test_a_run_saved_in_the_old_form_resumes_bit_for_bit(tmp_path):
    _train(tmp_path / "straight", "trainer.max_iterations=20")
    _train(tmp_path / "split", "trainer.max_iterations=10")
    _make_old(tmp_path / "split")
    saved = json.loads((checkpoint.find(tmp_path / "split") / "state.json").read_text())["config"]
    assert saved["precision"] == {"name": "fp16"}
    result = run_cli(f"resume={tmp_path / 'split'}", "trainer.max_iterations=20", "trainer.progress=false")
    assert result.returncode == 0, result.stderr
    straight, split = (load_npz(tmp_path / name / "model.npz") for name in ("straight", "split"))
    assert sorted(straight) == sorted(split)
    for key in straight:
        assert split[key].dtype == straight[key].dtype == numpy.float16
        numpy.testing.assert_array_equal(split[key], straight[key], err_msg=key)
    rows = [(r["iteration"], r["loss_scale"], r["skipped_steps"])
            for r in read_jsonl(tmp_path / "split" / "metrics.jsonl")]
    assert rows == [(r["iteration"], r["loss_scale"], r["skipped_steps"])
                    for r in read_jsonl(tmp_path / "straight" / "metrics.jsonl")]
    resaved = checkpoint.load_tree(checkpoint.find(tmp_path / "split"))["config"]
    assert {k: resaved[k] for k in NEW} == UPGRADED and "precision" not in resaved  # saved anew
    trained = load_model(tmp_path / "split")  # its .hydra/config.yaml is still the old form
    assert all(p.data.dtype == numpy.float16 for p in trained.model.params().values())
