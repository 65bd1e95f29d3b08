"""Peak memory of ``dataset=text`` on a corpus far larger than the memory it may take.

Builds a corpus of ``--gigabytes`` (default 1) by repeating the text files given (default: the
vim documentation this machine ships, ``/usr/share/vim/vim90/doc``: real English text), then
runs a real ``trainer-run experiment=char_gpt`` of a few iterations on it, which tokenizes it
into the run folder, trains from the memory-mapped ids and evaluates the first 65,536
validation tokens (``dataset.val_tokens``), and reports the command's peak
resident memory (``ru_maxrss`` of the child), the time, and the corpus's size for comparison:
a loader that read the text into memory would need at least the corpus's size (and the ids
beside it).

    python benchmarks/text_corpus.py [--gigabytes 1] [--source DIR] [--work DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MEASURED = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]); "
            "print('maxrss_kib=%d' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
            "sys.exit(done.returncode)")


def corpus(source: Path, out: Path, size: int) -> int:
    """Writes ``size`` bytes or more of ``source``'s ``.txt`` files, repeated, to ``out``."""
    parts = [p.read_bytes() for p in sorted(source.glob("*.txt"))]
    block = b"".join(parts)
    written = 0
    with open(out, "wb") as f:
        while written < size:
            f.write(block)
            written += len(block)
    return written


def measure(text: Path, run: Path) -> tuple[float, int]:
    """Seconds and peak resident bytes of a real char_gpt run of 5 iterations on ``text``."""
    shutil.rmtree(run, ignore_errors=True)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", MEASURED, sys.executable, "-m", "trainer_run.cli",
                           "experiment=char_gpt", f"dataset.path={text}", "trainer.max_iterations=5",
                           "trainer.eval_interval=5", "dataset.val_tokens=65536",
                           "trainer.log_interval=5", "trainer.progress=false",
                           f"hydra.run.dir={run}"], capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(done.stdout + done.stderr)
    return elapsed, int(done.stdout.strip().splitlines()[-1].split("=")[1]) * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gigabytes", type=float, default=1.0)
    parser.add_argument("--source", type=Path, default=Path("/usr/share/vim/vim90/doc"))
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="text-corpus-"))
    work.mkdir(parents=True, exist_ok=True)
    small, text = work / "small.txt", work / "corpus.txt"
    corpus(args.source, small, 1)            # the files once: about 10 MB
    size = corpus(args.source, text, int(args.gigabytes * 1e9))
    base_s, base = measure(small, work / "small_run")
    elapsed, peak = measure(text, work / "run")
    tokens = os.path.getsize(work / "run" / "tokens.bin")
    print(f"corpus: {size / 1e9:.2f} GB of {args.source} repeated; tokens.bin {tokens / 1e9:.2f} GB")
    print(f"trainer-run (tokenize, 5 iterations, 65,536 validation tokens): {elapsed:.0f} s, peak "
          f"resident memory {peak / 2**20:.0f} MiB = {peak / size:.3f} x the corpus; on the "
          f"files once ({os.path.getsize(small) / 1e6:.0f} MB): {base_s:.0f} s, "
          f"{base / 2**20:.0f} MiB")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.work is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
