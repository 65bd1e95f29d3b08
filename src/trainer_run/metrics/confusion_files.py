"""The confusion matrix of an evaluated split as files: its data as JSON (:func:`record`) and,
when matplotlib is installed (the ``plot`` extra), a picture (:func:`draw`).

In a run, :class:`ConfusionFiles` writes ``<run>/confusion/<split>.json`` and
``<split>.png`` (``val``, ``test``) at each evaluation of the split, replacing the previous
ones: ``val`` is the latest validation's, ``test`` the held-out test's (with the weights the
test used). ``trainer-eval`` keeps the matrix in its own record instead, and the picture
beside it.
"""

from __future__ import annotations

from pathlib import Path

import numpy

from trainer_run.storage import run_files

from ..storage import files, strict_json

ROWS = "true class"
COLUMNS = "predicted class"
ANNOTATED = 20
"""With at most this many classes each cell shows its count."""
LABELLED = 40
"""With at most this many classes the axes name each class."""


def record(split: str, matrix: numpy.ndarray, classes: list[str]) -> dict:
    """The JSON record of ``split``'s ``matrix``: ``split``, ``classes`` (by id), ``rows``
    and ``columns`` (what they count: scikit-learn's ``confusion_matrix`` layout, row ``i``
    column ``j`` the examples of class ``i`` predicted as ``j``) and ``matrix`` (lists of
    ints)."""
    return {"split": split, "classes": list(classes), "rows": ROWS, "columns": COLUMNS,
            "matrix": numpy.asarray(matrix).astype(int).tolist()}


def draw(path: Path, matrix: numpy.ndarray, classes: list[str], title: str, run: Path) -> bool:
    """Writes the picture of ``matrix`` to ``path`` (a PNG, replaced atomically; ``run``: the
    run folder it is in): each cell coloured by its share of its row (the class's examples),
    its count written in it for at most :data:`ANNOTATED` classes. Returns False, writing
    nothing, when matplotlib is not installed."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return False
    matrix = numpy.asarray(matrix)
    count = len(matrix)
    side = min(max(4.0, 0.45 * count + 2.0), 16.0)
    figure = Figure(figsize=(side + 1.0, side), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    ax = figure.subplots()
    totals = matrix.sum(axis=1, keepdims=True)
    shares = numpy.divide(matrix, totals, out=numpy.zeros(matrix.shape), where=totals != 0)
    image = ax.imshow(shares, cmap="Blues", vmin=0.0, vmax=1.0)
    figure.colorbar(image, ax=ax, label="share of the true class's examples")
    if count <= ANNOTATED:
        for (i, j), value in numpy.ndenumerate(matrix):
            ax.text(j, i, str(value), ha="center", va="center", fontsize="small",
                    color="white" if shares[i, j] > 0.5 else "black")
    if count <= LABELLED:
        ax.set_xticks(range(count), classes, rotation=90 if count > 10 else 0)
        ax.set_yticks(range(count), classes)
    ax.set_xlabel(COLUMNS)
    ax.set_ylabel(ROWS)
    ax.set_title(title, fontsize="medium")
    files.write_atomic(path, lambda f: figure.savefig(f, format="png"), run=run)
    return True


class ConfusionFiles:
    """Writes an evaluated split's confusion matrix into the run folder ``out`` (see the
    module docstring); called by :class:`~.run_metrics.RunMetrics` with the split's prefix
    (``val/``), the matrix and the class names."""

    def __init__(self, out: Path):
        self.out = Path(out)

    def __call__(self, prefix: str, matrix: numpy.ndarray, classes: list[str]) -> None:
        split = prefix.rstrip("/").replace("/", "_")
        folder = self.out / run_files.CONFUSION
        files.make_folder(folder, self.out)
        data = strict_json.dumps(record(split, matrix, classes))
        files.write_atomic(folder / f"{split}.json", data, run=self.out)
        draw(folder / f"{split}.png", matrix, classes, f"{split} confusion matrix ({self.out.name})",
             self.out)
