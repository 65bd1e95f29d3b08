"""Weight averaging from the command line: trainer.ema_decay and trainer.swa write model_ema.npz
and model_swa.npz, log val/ema/ metrics at each evaluation, rank by them as the objective, and
report the SWA weights' val/swa/ metrics in summary.json; the run's ``metrics`` are measured
on the averaged weights too, as trainer-eval measures model_ema.npz."""

import json
import subprocess
import sys

import numpy as np
import pytest
from helpers import load_npz, read_jsonl, run_cli


def test_ema_and_swa_from_the_command_line(tmp_path):
    out = tmp_path / "run"
    done = run_cli("trainer.max_iterations=20", "trainer.eval_interval=10",
                   "trainer.log_interval=10", "trainer.ema_decay=0.9", "trainer.swa.start=0.5",
                   "trainer.swa.interval=5", "objective.metric=val/ema/accuracy",
                   "objective.mode=max", "trainer.progress=false", f"hydra.run.dir={out}",
                   "metrics=[f1_macro]", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = read_jsonl(out / "metrics.jsonl")
    assert [row["iteration"] for row in rows if "val/ema/loss" in row] == [10, 20]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["objective"]["metric"] == "val/ema/accuracy"
    assert summary["swa"] == {"averaged": 3, "bn_batches": 0}  # iterations 10, 15 and 20
    assert {"val/ema/accuracy", "val/swa/accuracy", "val/swa/loss"} <= set(summary)
    ema, swa, last = (load_npz(out / f"model{kind}.npz") for kind in ("_ema", "_swa", ""))
    assert ema.keys() == swa.keys() == last.keys()
    assert not np.array_equal(ema["l1/W"], last["l1/W"])
    assert summary["objective"]["best_iteration"] == 20  # the best weights are the last EMA's
    best = load_npz(out / "model_best.npz")
    assert all(np.array_equal(best[k], ema[k]) for k in ema)
    # the run's metrics are measured on the averaged weights too: trainer-eval of model_ema.npz
    # on the validation split (another path) gives the last row's val/ema/ values
    assert {"val/ema/f1_macro", "val/swa/f1_macro"} <= set(summary)
    done = subprocess.run([sys.executable, "-m", "trainer_run.cli.evaluate", str(out),
                           f"checkpoint={out / 'model_ema.npz'}", "split=val"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    record = json.loads(sorted((out / "eval").glob("*.json"))[-1].read_text())
    last = [row for row in rows if "val/ema/loss" in row][-1]   # the SWA row comes after it
    assert record["metrics"]["val/f1_macro"] == pytest.approx(last["val/ema/f1_macro"], rel=1e-9)
    assert record["metrics"]["val/loss"] == pytest.approx(last["val/ema/loss"], rel=1e-6)
