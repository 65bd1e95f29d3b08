"""Language models from the command line (``dataset=text``): a run stopped with Ctrl-C and
resumed ends bit-identical to an uninterrupted one (GPT and LSTM, char and BPE tokens);
``trainer-eval`` reproduces the logged validation loss exactly; ``trainer-generate`` prints
the same text for the same seed; bad input is one line each."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
from command.test_preemption import Run, assert_same_run, rows_written, summary_of, wait_for
from helpers import read_jsonl

ONE_WORKER = True  # the module's runs are trained once (tests/conftest.py)

TEXT = ("It is a truth universally acknowledged, that a single man in possession of a good "
        "fortune, must be in want of a wife. However little known the feelings or views of such "
        "a man may be on his first entering a neighbourhood, this truth is so well fixed in the "
        "minds of the surrounding families, that he is considered the rightful property of some "
        "one or other of their daughters.\n") * 12
SMALL = {"gpt": ("model.n_layer=1", "model.n_head=2", "model.n_embd=16", "model.block_size=16"),
         "lstm_lm": ("model=lstm_lm", "model.n_embd=16", "model.hidden_size=16",
                     "model.num_layers=2")}
TINY = ("experiment=char_gpt", "dataset.block_size=16", "dataset.batch_size=4",
        "trainer.progress=false")


def _text(tmp_path):
    path = tmp_path / "input.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def _command(module: str, *args, cwd=None):
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def _error(done) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize("model, tokenizer", [("gpt", "char"), ("lstm_lm", "bpe")])
def test_a_run_stopped_with_ctrl_c_and_resumed_ends_bit_identical(tmp_path, model, tokenizer):
    if tokenizer == "bpe":
        pytest.importorskip("tokenizers")
    text = _text(tmp_path)
    common = (*TINY, *SMALL[model], f"dataset.path={text}", f"dataset.tokenizer={tokenizer}",
              "dataset.vocab_size=300" if tokenizer == "bpe" else "dataset.vocab_size=null",
              "trainer.max_iterations=400", "trainer.log_interval=10", "trainer.eval_interval=200",
              "trainer.checkpoint_interval=100000", "scheduler.max_update=400",
              "scheduler.warmup_steps=20")
    reference = tmp_path / "reference"
    run = Run(tmp_path / "reference.log", *common, f"hydra.run.dir={reference}")
    assert run.wait() == 0, run.output()
    out = tmp_path / "stopped"
    run = Run(tmp_path / "stopped.log", *common, f"hydra.run.dir={out}")
    assert wait_for(lambda: rows_written(out) >= 3, run), run.output()
    run.signal(signal.SIGINT)
    assert run.wait(30) == 130, run.output()
    assert summary_of(out)["status"] == "interrupted" and summary_of(out)["iteration"] < 400
    run = Run(tmp_path / "resume.log", f"resume={out}")
    assert run.wait() == 0, run.output()
    assert_same_run(out, reference)
    assert (out / "tokens.bin").read_bytes() == (reference / "tokens.bin").read_bytes()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("text")
    text = _text(folder)
    out = folder / "run"
    done = _command("trainer_run.cli", *TINY, *SMALL["gpt"], f"dataset.path={text}",
                    "trainer.max_iterations=30", "trainer.eval_interval=30", "trainer.log_interval=10",
                    f"hydra.run.dir={out}")
    assert done.returncode == 0, done.stderr
    return out


def test_trainer_eval_gives_the_logged_validation_loss_exactly(trained):
    logged = [row["val/loss"] for row in read_jsonl(trained / "metrics.jsonl") if "val/loss" in row]
    done = _command("trainer_run.cli.evaluate", trained, "split=val", "checkpoint=last")
    assert done.returncode == 0, done.stderr
    written = done.stdout.strip().splitlines()[-1].removeprefix("written: ")
    record = json.loads(open(written).read())
    assert record["metrics"]["val/loss"] == logged[-1]
    blocks = (len(TEXT) - int(len(TEXT) * 0.9) - 1) // 16
    assert record["examples"] == blocks


def test_trainer_generate_prints_the_same_text_for_the_same_seed(trained):
    args = (trained, "prompt=It is", "max_new_tokens=40", "temperature=0.8", "top_k=10")
    first = _command("trainer_run.cli.generate", *args, "seed=3")
    again = _command("trainer_run.cli.generate", *args, "seed=3")
    other = _command("trainer_run.cli.generate", *args, "seed=4")
    assert first.returncode == 0, first.stderr
    assert first.stdout == again.stdout != other.stdout
    text = first.stdout[:-1]  # print's newline
    assert text.startswith("It is") and len(text) == len("It is") + 40
    assert set(text) <= set(TEXT)
    import trainer_run

    assert trainer_run.load_model(trained, "last").generate(
        "It is", 40, 0.8, 10, seed=3) == text


def test_a_prompt_outside_the_vocabulary_is_one_line(trained):
    done = _command("trainer_run.cli.generate", trained, "prompt=Zürich")
    assert done.returncode == 2
    assert _error(done) == ["error: the prompt: character 'Z' at position 0 is not in the "
                            "tokenizer's vocabulary of 29 characters; use only the characters of "
                            "the text it was made from"]


@pytest.mark.parametrize("case", ["missing", "not utf-8", "short", "heads", "block"])
def test_bad_text_input_is_one_line(tmp_path, case):
    text = _text(tmp_path)
    extra = {"missing": (f"dataset.path={tmp_path / 'nowhere.txt'}",),
             "not utf-8": (f"dataset.path={tmp_path / 'latin1.txt'}",),
             "short": (f"dataset.path={tmp_path / 'short.txt'}",),
             "heads": (f"dataset.path={text}", "model.n_head=3"),
             "block": (f"dataset.path={text}", "dataset.block_size=32")}[case]
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9 au lait")
    (tmp_path / "short.txt").write_text("tiny text", encoding="utf-8")
    done = _command("trainer_run.cli", *TINY, *SMALL["gpt"], *extra,
                    f"hydra.run.dir={tmp_path / 'run'}")
    assert done.returncode == 2, done.stderr
    expected = {
        "missing": f"error: dataset.path={tmp_path / 'nowhere.txt'} does not exist; give a UTF-8 "
                   "text file or a folder of .txt files",
        "not utf-8": f"error: dataset: {tmp_path / 'latin1.txt'} is not UTF-8 text: the byte at offset 3 "
                     "(e9 hex) is not part of a UTF-8 character; convert the file to UTF-8 "
                     "(iconv -t UTF-8) and try again",
        "short": "error: dataset: the text has 9 tokens, fewer than dataset.block_size + 1 = 17; give a "
                 "longer text or a smaller dataset.block_size",
        "heads": "error: model.n_embd=16 is not divisible by n_head=3; choose n_head that "
                 "divides n_embd",
        "block": "error: a sequence of 32 tokens is longer than the model's block_size=16",
    }[case]
    lines = _error(done)
    assert len(lines) == 1 and lines[0].startswith(expected), done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "run").exists()


def test_predict_takes_ids_of_any_length_and_gives_the_forwards_logits(trained):
    import numpy

    import trainer_run

    model = trainer_run.load_model(trained, "last")
    ids = model.encode(TEXT[:16])
    whole = model.predict(ids[None])
    assert whole.shape == (1, 16, 29)
    numpy.testing.assert_allclose(model.predict(ids[:5]), whole[0, :5], rtol=1e-5, atol=1e-6)
    numpy.testing.assert_array_equal(whole[0], model.model.forward(ids[None].astype(numpy.int64)).data[0])
    with pytest.raises(TypeError, match="takes token ids"):
        model.predict(ids / 2)


def test_a_strangers_run_naming_code_is_refused_before_anything_is_imported(trained, tmp_path):
    import shutil

    copy = tmp_path / "stranger"
    shutil.copytree(trained, copy)
    config = copy / ".hydra" / "config.yaml"
    config.write_text(config.read_text().replace("_target_: trainer_run.models.gpt.GPT",
                                                 "_target_: planted.Model"))
    (tmp_path / "planted.py").write_text("open('imported', 'w').close()\nclass Model: pass\n")
    done = _command("trainer_run.cli.generate", copy, "max_new_tokens=5", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert len(_error(done)) == 1 and "planted.Model" in _error(done)[0]
    assert "trust=true" in _error(done)[0]
    assert not (tmp_path / "imported").exists()
