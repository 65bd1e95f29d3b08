"""MPICH's segments left by killed jobs are removed before MPI starts; segments a live process
has open or mapped are kept (in a folder of the test's, with processes holding the files)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

HOLD = """import mmap, os, sys, time
from pathlib import Path
opened = open(sys.argv[1], "r+b")
mapped_file = open(sys.argv[2], "r+b")
mapped = mmap.mmap(mapped_file.fileno(), 0)
mapped_file.close()  # the mapping stays, as MPICH's does
Path(sys.argv[3]).write_text("ready")
time.sleep(60)
"""

REMOVE = """import json, sys
from pathlib import Path
from trainer_run.kvstore import shm_leftovers
print(json.dumps(sorted(p.name for p in shm_leftovers.remove(Path(sys.argv[1])))))
"""


def test_only_segments_no_process_has_open_or_mapped_are_removed(tmp_path):
    names = ["mpich_shm_1a2b_0", "mpich_shm_3c4d_0", "mpich_vci_5e6f_0", "mpich_shm_7a8b_1", "other_0"]
    for name in names:
        (tmp_path / name).write_bytes(b"\0" * 4096)
    ready = tmp_path / "ready"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / names[0]), str(tmp_path / names[1]),
                               str(ready)])
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert time.monotonic() < deadline and holder.poll() is None
            time.sleep(0.01)
        done = subprocess.run([sys.executable, "-c", REMOVE, str(tmp_path)], capture_output=True, text=True)
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["mpich_shm_7a8b_1", "mpich_vci_5e6f_0"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*names[:2], "other_0", "ready"])
