"""A one-node SLURM cluster for the ``slurm`` tests: Debian's ``slurm-wlm`` and ``munge``,
started by the tests with a config written here, in a folder of their own.

:class:`Slurm` writes a munge key and a ``slurm.conf`` (this machine as the one node, with
its cores, in partition ``debug``; ports chosen free; state, spool and logs in ``workdir``),
starts ``munged``, ``slurmctld`` and ``slurmd`` in the foreground as child processes, and
waits until the node is idle. Commands reach it through :attr:`Slurm.env` (``SLURM_CONF``).
:meth:`Slurm.close` (also on an exception in ``with``) stops them; nothing outside
``workdir`` is written.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "srun", "sinfo", "scontrol")

CONFIG = """ClusterName=trainerrun
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={socket},cred_expire=5
CredType=cred/munge
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobRequeue=1
KillWait=5
SchedulerParameters=sched_interval=1
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName={host} CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=urgent Nodes={host} MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF
"""


def _sbin(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def available() -> str | None:
    """None when a cluster can be started here, else why not (for a skip)."""
    if os.geteuid() != 0:
        return "the slurm tests start slurmctld and slurmd as root"
    missing = [d for d in DAEMONS if _sbin(d) is None]
    if missing:
        return f"{', '.join(missing)} not found: apt install slurm-wlm munge"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Slurm:
    """A one-node cluster in ``workdir`` (see the module docstring)."""

    def __init__(self, workdir: Path):
        self.dir = Path(workdir)
        self.host = socket.gethostname()
        self.env = {**os.environ, "SLURM_CONF": str(self.dir / "slurm.conf")}
        self._daemons: list[subprocess.Popen] = []
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "Slurm":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> None:
        for sub in ("state", "spool", "munge"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        munge = self.dir / "munge"
        munge.chmod(0o700)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        socket_path = munge / "munge.socket"
        self._spawn([_sbin("munged"), "-F", "-f", f"--socket={socket_path}", f"--key-file={key}",
                     f"--log-file={munge / 'munged.log'}", f"--pid-file={munge / 'munged.pid'}",
                     f"--seed-file={munge / 'seed'}"])
        self._wait(lambda: socket_path.exists(), "munged")
        self.ctld_port = free_port()
        (self.dir / "slurm.conf").write_text(CONFIG.format(
            host=self.host, socket=socket_path, ctld_port=self.ctld_port, d_port=free_port(),
            dir=self.dir, cpus=os.cpu_count()))
        self._spawn([_sbin("slurmctld"), "-D", "-c"])
        self._spawn([_sbin("slurmd"), "-D"])
        self._wait(self._idle, "the node to be idle")

    def _spawn(self, argv: list[str]) -> None:
        log = open(self.dir / f"{Path(argv[0]).name}.out", "w")  # noqa: SIM115
        self._daemons.append(subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT))

    def _idle(self) -> bool:
        out = self.run(["sinfo", "-h", "-o", "%t"]).stdout.strip()
        return out == "idle"

    def _wait(self, ready, what: str, seconds: float = 30) -> None:
        deadline = time.monotonic() + seconds
        while not ready():
            if time.monotonic() > deadline:
                raise RuntimeError(f"SLURM test cluster: no {what} after {seconds:g} s; see {self.dir}")
            time.sleep(0.2)

    def run(self, argv: list[str], timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
        """``argv`` as a client of this cluster."""
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout,
                              **kwargs)

    def close(self) -> None:
        """Cancels every job (its processes outlive slurmd otherwise), then stops the daemons
        (slurmd and slurmctld first, munged last)."""
        if len(self._daemons) == 3:
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                self.run(["scancel", "--full", "--signal=KILL", f"--user={os.getuid()}"], timeout=30)
                with contextlib.suppress(RuntimeError):
                    self._wait(lambda: not self.run(["squeue", "-h"]).stdout.strip(), "jobs to end", 30)
        for daemon in reversed(self._daemons):
            daemon.terminate()
        for daemon in reversed(self._daemons):
            try:
                daemon.wait(timeout=15)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        self._daemons.clear()
