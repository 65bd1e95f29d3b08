"""TensorBoard's HParams (training/loggers/tensorboard.py), read back with TensorBoard's own
EventAccumulator: a value the user wrote with a resolver (``${oc.env:TOKEN}``) is there as
written, never its value, and the internal keys are not there."""

from __future__ import annotations

from omegaconf import OmegaConf

from trainer_run.training.loggers import RunInfo

WRITTEN = {"seed": 0, "optimizer": {"learning_rate": 0.1},
           "model": {"token": "${oc.env:TOKEN}", "hidden": [8, "${oc.env:TOKEN}"]},
           "dataset": {"md5": {"train_images": "f68b3c2d"}},
           "updater": {"callbacks": {"forward_on_start": None}}}


def test_hparams_hold_a_resolver_as_written_and_no_internals(tmp_path, monkeypatch):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    from trainer_run.training.loggers.tensorboard import TensorBoard

    monkeypatch.setenv("TOKEN", "s3cret")
    config = OmegaConf.to_container(OmegaConf.create(WRITTEN), resolve=True)
    assert config["model"]["token"] == "s3cret"
    TensorBoard(RunInfo(config, written=WRITTEN)).start(tmp_path, [])
    accumulator = EventAccumulator(str(tmp_path / "tensorboard"))
    accumulator.Reload()
    start = accumulator.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    hparams = plugin_data_pb2.HParamsPluginData.FromString(start).session_start_info.hparams
    assert {k: v.ListFields()[0][1] for k, v in hparams.items()} == {
        "seed": 0.0, "optimizer.learning_rate": 0.1, "model.token": "${oc.env:TOKEN}",
        "model.hidden": "[8, '${oc.env:TOKEN}']"}
    events = b"".join(p.read_bytes() for p in (tmp_path / "tensorboard").iterdir())
    assert b"s3cret" not in events and b"f68b3c2d" not in events
