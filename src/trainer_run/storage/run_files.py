"""The names of a run's files: each file and folder trainer-run keeps in a run folder, spelled
once here and imported by every module that writes, reads or looks for it.

A run folder ``<run>`` holds the run's record (:data:`RECORD`: the config, Hydra's settings,
the overrides, the signature and the mark), its lock (:data:`LOCK`), its checkpoints
(:data:`CHECKPOINTS`, each ``iter_<N>`` in the format of
:mod:`trainer_run.storage.checkpoint`, which names the files inside one), the loggers' files,
the summary and final weights, the data's record, and what ``trainer-run evaluate`` writes
(:data:`EVAL`). This module imports nothing, so any module may import it.
"""

RECORD = ".hydra"
"""The folder of a run's record: Hydra's files and the config's signature."""
CONFIG = "config.yaml"
"""In :data:`RECORD`: the composed config (Hydra writes it)."""
HYDRA = "hydra.yaml"
"""In :data:`RECORD`: Hydra's own settings for the run (Hydra writes it)."""
OVERRIDES = "overrides.yaml"
"""In :data:`RECORD`: the command line's overrides (Hydra writes it)."""
SIGNATURE = "config.sig"
"""In :data:`RECORD`: this user's signature of :data:`CONFIG` (:mod:`trainer_run.runs.trust`)."""
MARK = "trainer-run.json"
"""In :data:`RECORD`: the file that marks the folder as a run of trainer-run's."""
SLURM = "slurm.json"
"""In :data:`RECORD`: the SLURM job that runs the run (:mod:`trainer_run.runner.slurm_requeue`)."""

LOCK = ".lock"
"""The lock a process holds while it works in the run."""
CHECKPOINTS = "checkpoints"
"""The folder of the run's checkpoints."""
SUMMARY = "summary.json"
"""How the run ended: status, iteration, the last and best metrics."""
MODEL = "model.npz"
"""The final model's weights."""
BEST_MODEL = "model_best.npz"
"""The weights of the best evaluation (``trainer.keep_best``)."""
EMA_MODEL = "model_ema.npz"
"""The exponential moving average of the weights (``trainer.ema_decay``)."""
SWA_MODEL = "model_swa.npz"
"""The stochastic weight average, its batch normalization statistics recomputed (``trainer.swa``)."""
METRICS = "metrics.jsonl"
"""The metrics, one JSON line per report."""
METRICS_CSV = "metrics.csv"
"""The metrics as CSV (the ``csv`` logger)."""
PLOT = "plot.png"
"""The curves of the metrics (the ``plot`` logger)."""
TENSORBOARD = "tensorboard"
"""The folder of TensorBoard's event files (the ``tensorboard`` logger)."""
MLFLOW = "mlflow.json"
"""The MLflow run the ``mlflow`` logger logs to (its tracking URI and run id), which a resumed
run continues."""
PROFILE = "profile.json"
"""Where the time went (``trainer.profile``)."""
DATA = "data.json"
"""The data's record: the task, the shapes, the class names, the files read."""
NORMALIZATION = "normalization.npz"
"""The inputs' normalization, ``mean`` and ``std`` per feature."""
TOKENIZER = "tokenizer.json"
"""A text's tokenizer (``dataset=text``), its state as plain data."""
TOKENS = "tokens.bin"
"""A text's token ids (``dataset=text``), raw, memory-mapped by the run."""
TOKENS_RECORD = "tokens.json"
"""What :data:`TOKENS` holds: the text's files (sizes, SHA-256) and the tokenizer's digest."""
EVAL = "eval"
"""The folder of ``trainer-run evaluate``'s results."""
EXPORT = "export"
"""The folder of ``trainer-export``'s files (when no ``out=`` is named)."""

CONFUSION = "confusion"
"""The folder of the evaluated splits' confusion matrices (``metrics=[confusion_matrix]``):
``<split>.json`` and ``<split>.png`` each (:mod:`trainer_run.metrics.confusion_files`); in
:data:`EVAL`, the word that ends a picture's name (``<time>_confusion.png``)."""
