"""Test helpers for the image sets: a local HTTP server standing in for the mirrors, and
writers of tiny MNIST-format files and CIFAR-10 binary archives."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import re
import socket
import tarfile
import threading
import time
from pathlib import Path

import numpy
import pytest

from trainer_run.data.idx import write_idx

CIFAR_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
                 "truck"]


def md5(content: bytes) -> str:
    return hashlib.md5(content).hexdigest()


class FileServer:
    """Serves ``routes`` (URL path: bytes) on 127.0.0.1 from a thread and records each request
    as ``(path, Range header)``. ``cut[path] = n``: the next ``n`` answers for ``path`` send half
    their body, then drop the connection. ``ranges``: whether Range requests are honoured
    (206), else answered with the whole body (200). ``delay``: seconds between blocks of
    ``block`` bytes (4 KiB)."""

    def __init__(self):
        self.routes: dict[str, bytes] = {}
        self.cut: dict[str, int] = {}
        self.ranges = True
        self.delay = 0.0
        self.block = 4096
        self.requests: list[tuple[str, str | None]] = []
        self.lock = threading.Lock()
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.thread = threading.Thread(target=lambda: self.httpd.serve_forever(0.05), daemon=True)

    def url(self, prefix: str = "/") -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{prefix}"

    def gets(self, path: str) -> int:
        """How many requests asked for ``path``."""
        return sum(p == path for p, _ in self.requests)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def _handler(server: FileServer):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            with server.lock:
                server.requests.append((self.path, self.headers.get("Range")))
                body = server.routes.get(self.path)
                cut = server.cut.get(self.path, 0)
                if cut:
                    server.cut[self.path] = cut - 1
            if body is None:
                return self.send_error(404)
            start = self._start(len(body))
            if start is None:
                return self.send_error(416)
            self.send_response(206 if start else 200)
            self.send_header("Content-Length", str(len(body) - start))
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            self.end_headers()
            payload = body[start:]
            self._send(payload[:len(payload) // 2] if cut else payload)

        def _start(self, size: int) -> int | None:
            match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
            if not server.ranges or not match:
                return 0
            start = int(match.group(1))
            return start if start < size else None

        def _send(self, payload: bytes) -> None:
            for at in range(0, len(payload), server.block):
                self.wfile.write(payload[at:at + server.block])
                if server.delay:
                    self.wfile.flush()
                    time.sleep(server.delay)

        def log_message(self, *args):
            pass

    return Handler


def check_run(run: Path, prototypes: numpy.ndarray) -> None:
    """The run made 5 updates of 10 of its 90 training images (:func:`class_images`, 10 of
    each class, 1 of each held out), and its final validation loss and accuracy are those of
    its saved MLP (hidden size 8) on the 10 class prototypes scaled to [0, 1]: it trained on
    these pixels with these labels."""
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["iteration"] == 5
    assert summary["epoch"] == pytest.approx(5 * 10 / 90)
    with numpy.load(run / "model.npz") as saved:
        params = {k: saved[k] for k in saved.files}
    assert params["l1/W"].shape == (8, prototypes[0].size) and params["l2/W"].shape == (10, 8)
    x = prototypes.reshape(10, -1).astype(numpy.float64) / 255
    logits = numpy.maximum(x @ params["l1/W"].T + params["l1/b"], 0) @ params["l2/W"].T + params["l2/b"]
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_p = shifted - numpy.log(numpy.exp(shifted).sum(axis=1, keepdims=True))
    assert summary["val/loss"] == pytest.approx(-log_p[range(10), range(10)].mean(), rel=1e-5)
    assert summary["val/accuracy"] == pytest.approx((logits.argmax(axis=1) == range(10)).mean())


def closed_port_url() -> str:
    """The URL of a local port nothing listens on (connections are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/"


def class_images(n: int, shape: tuple, seed: int = 0) -> tuple:
    """``n`` uint8 images of ``shape``, labels 0..9 in turn, every image of a class the same
    (its class's random prototype): a run's validation loss is then known whichever images of
    a class it holds out. Returns ``(x, y, prototypes)``."""
    prototypes = numpy.random.default_rng(seed).integers(0, 256, (10, *shape), dtype=numpy.uint8)
    y = (numpy.arange(n) % 10).astype(numpy.uint8)
    return prototypes[y], y, prototypes


MNIST_NAMES = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
               "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}


def mnist_files(folder: Path, n_train: int = 100, n_test: int = 20) -> tuple[dict, dict]:
    """MNIST's four gzipped IDX files, tiny (:func:`class_images` of 28x28 for training,
    random images for testing), written into ``folder``: the file contents by name and the
    arrays ``{"train": (x, y), "test": (x, y), "prototypes": ...}``."""
    x, y, prototypes = class_images(n_train, (28, 28))
    rng = numpy.random.default_rng(1)
    arrays = {"train": (x, y), "prototypes": prototypes,
              "test": (rng.integers(0, 256, (n_test, 28, 28), dtype=numpy.uint8),
                       (numpy.arange(n_test) % 10).astype(numpy.uint8))}
    contents = {}
    folder.mkdir(parents=True, exist_ok=True)
    for split, names in MNIST_NAMES.items():
        for name, array in zip(names, arrays[split]):
            write_idx(folder / name, array, compress=True)
            contents[name] = (folder / name).read_bytes()
    return contents, arrays


def cifar_archive(path: Path, per_batch: int = 4, seed: int = 0, sizes: dict | None = None,
                  extra: dict | None = None, prototypes: bool = False) -> dict:
    """A CIFAR-10 binary archive like the published one at ``path``, with ``per_batch`` records
    in each batch (random, or :func:`class_images` with ``prototypes``); ``sizes`` cuts
    members to a byte count, ``extra`` adds members (name: bytes, or a TarInfo for links).
    Returns ``{"train": (x, y), "test": (x, y), "prototypes": ...}``."""
    rng = numpy.random.default_rng(seed)
    members, arrays = {}, {}
    _, _, arrays["prototypes"] = class_images(10, (3, 32, 32), seed)
    for split, names in (("train", [f"data_batch_{i}.bin" for i in range(1, 6)]),
                         ("test", ["test_batch.bin"])):
        xs, ys = [], []
        for name in names:
            y = rng.integers(0, 10, size=per_batch, dtype=numpy.uint8)
            x = rng.integers(0, 256, size=(per_batch, 3, 32, 32), dtype=numpy.uint8)
            if prototypes:
                x, y, _ = class_images(per_batch, (3, 32, 32), seed)
            records = numpy.concatenate([y[:, None], x.reshape(per_batch, -1)], axis=1)
            members[f"cifar-10-batches-bin/{name}"] = records.tobytes()
            xs.append(x)
            ys.append(y)
        arrays[split] = (numpy.concatenate(xs), numpy.concatenate(ys))
    members["cifar-10-batches-bin/batches.meta.txt"] = ("\n".join(CIFAR_CLASSES) + "\n\n").encode()
    members["cifar-10-batches-bin/readme.html"] = b"<html></html>"
    for name, size in (sizes or {}).items():
        members[name] = members[name][:size]
    members.update(extra or {})
    with tarfile.open(path, "w:gz") as tar:
        for name, content in members.items():
            if isinstance(content, tarfile.TarInfo):
                tar.addfile(content)
                continue
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return arrays
