"""Hosts for the ``cluster`` tests: Linux network namespaces on this machine, joined by veth
pairs to a bridge that lives in a namespace of its own.

Each host ``node<i>`` is a namespace with one interface, ``eth0``, at ``10.<net>.0.<i>/24`` and
its own ``/etc/hosts`` naming every node (``ip netns exec`` mounts ``/etc/netns/<ns>/hosts``
there); its processes also get the host name ``node<i>`` (a UTS namespace of their own). No
address outside the namespaces is set up or contacted; every host also resolves :data:`GONE`,
a host that is down. :meth:`Hosts.mpiexec` starts MPICH's ``mpiexec`` on the first host with a
host file (:meth:`Hosts.trainer_run`: ``trainer-run --hosts``); its launcher is a script
written here that enters the namespace of the host Hydra names instead of calling ``ssh``,
and fails for a host without one, as ``ssh`` does for a host it cannot reach. MPI is told to use
TCP over ``eth0`` (UCX and libfabric would otherwise notice that every namespace is one
machine and share memory). :meth:`Hosts.close` (also on an exception in ``with``) kills what
runs in the namespaces and removes them and their files.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

GONE = "gone"
"""A host name every host resolves, at an address no host has (a machine that is down)."""
MPI_OVER_TCP = {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "eth0", "FI_PROVIDER": "tcp"}
"""The environment that makes MPICH's ranks on different namespaces talk over TCP."""

LAUNCHER = """#!/bin/sh
# Hydra's ssh launcher calls: <this> [ssh options] HOST COMMAND; run COMMAND on HOST's namespace.
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
host=$1; shift
exec ip netns exec "{prefix}${{host#node}}" unshare --uts sh -c "hostname $host && exec $*"
"""


def available() -> str | None:
    """None when hosts can be made here (a namespace, a veth pair, a process with its own host
    name inside it), else why not (for a skip). Namespaces left by an earlier test process
    that was killed are removed first."""
    if os.geteuid() != 0:
        return "the cluster tests make network namespaces: they need root"
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            return f"the cluster tests need {tool} (Debian: iproute2, util-linux)"
    _remove_stale()
    probe = f"tr{os.getpid()}probe"
    steps = [["ip", "netns", "add", probe],
             ["ip", "-n", probe, "link", "add", "a0", "type", "veth", "peer", "name", "b0"],
             ["ip", "netns", "exec", probe, "unshare", "--uts", "sh", "-c", "hostname probe"]]
    try:
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True)
            if done.returncode != 0:
                return f"{' '.join(step[:4])} failed here: {done.stderr.strip()}"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _remove_stale() -> None:
    """Removes the namespaces (and ``/etc/netns`` files) of test processes that are gone."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for name in (line.split()[0] for line in listed.splitlines() if line.strip()):
        match = re.fullmatch(r"tr(\d+)(h\d+|sw|probe)", name)
        if match and not Path(f"/proc/{match.group(1)}").exists():
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
            shutil.rmtree(Path("/etc/netns") / name, ignore_errors=True)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


class Hosts:
    """``count`` hosts ``node1`` .. ``node<count>`` (see the module docstring); ``workdir``
    holds the launcher script and the host file."""

    def __init__(self, count: int, workdir: Path, net: int = 77):
        self.names = [f"node{i}" for i in range(1, count + 1)]
        self.prefix = f"tr{os.getpid()}h"
        self.switch = f"tr{os.getpid()}sw"
        self.net = net
        self.workdir = Path(workdir)
        self.launcher = self.workdir / "netns-launcher"
        self._made: list[str] = []
        try:
            self._make()
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "Hosts":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def namespace(self, host: str) -> str:
        return f"{self.prefix}{host.removeprefix('node')}"

    def address(self, host: str) -> str:
        return f"10.{self.net}.0.{host.removeprefix('node')}"

    def _make(self) -> None:
        _ip("netns", "add", self.switch)
        self._made.append(self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        hosts = ("127.0.0.1 localhost\n" + "".join(f"{self.address(h)} {h}\n" for h in self.names)
                 + f"10.{self.net}.0.99 {GONE}\n")
        for host in self.names:
            ns, port = self.namespace(host), f"{self.namespace(host)}p"
            _ip("netns", "add", ns)
            self._made.append(ns)
            etc = Path("/etc/netns") / ns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(hosts)
            _ip("link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", port, "netns", self.switch)
            _ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"{self.address(host)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.launcher.write_text(LAUNCHER.format(prefix=self.prefix))
        self.launcher.chmod(0o755)

    def command(self, host: str, argv: list[str]) -> list[str]:
        """``argv`` as a command that runs on ``host``."""
        return ["ip", "netns", "exec", self.namespace(host), "unshare", "--uts", "--", "sh", "-c",
                'hostname "$0" && exec "$@"', host, *argv]

    def mpiexec(self, mpiexec: str, hosts: list[str], argv: list[str], per_host: int = 1) -> list[str]:
        """A command that runs ``argv`` under ``mpiexec`` with ``per_host`` ranks on each of
        ``hosts`` (a host file), started from the first of them."""
        hostfile = self.workdir / "hostfile"
        hostfile.write_text("".join(f"{h}:{per_host}\n" for h in hosts))
        env = [a for k, v in MPI_OVER_TCP.items() for a in ("-genv", k, v)]
        return self.command(hosts[0], [mpiexec, "-launcher", "ssh", "-launcher-exec",
                                       str(self.launcher), "-f", str(hostfile),
                                       "-n", str(per_host * len(hosts)), *env, *argv])

    def trainer_run(self, hosts: list[str], argv: list[str], per_host: int = 1) -> list[str]:
        """A command that runs ``trainer-run --hosts <host file> argv`` on the first of
        ``hosts``, MPICH's launcher set to this class's (``HYDRA_LAUNCHER_EXEC``)."""
        hostfile = self.workdir / "hostfile"
        hostfile.write_text("".join(f"{h}:{per_host}\n" for h in hosts))
        env = {"HYDRA_LAUNCHER": "ssh", "HYDRA_LAUNCHER_EXEC": str(self.launcher), **MPI_OVER_TCP}
        return self.command(hosts[0], ["env", *(f"{k}={v}" for k, v in env.items()), sys.executable,
                                       "-m", "trainer_run.cli", "--hosts", str(hostfile), *argv])

    def received(self, host: str) -> int:
        """Bytes ``host``'s ``eth0`` has received."""
        out = subprocess.run(["ip", "netns", "exec", self.namespace(host), "cat",
                              "/sys/class/net/eth0/statistics/rx_bytes"],
                             capture_output=True, text=True, check=True).stdout
        return int(out)

    def processes(self, host: str, program: str, containing: str) -> list[int]:
        """The pids of ``host``'s processes that run ``program`` with ``containing`` among its
        arguments."""
        pids = subprocess.run(["ip", "netns", "pids", self.namespace(host)], capture_output=True,
                              text=True).stdout.split()
        found = []
        for pid in pids:
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
            except OSError:
                continue
            if argv[0] == program and containing in argv:
                found.append(int(pid))
        return found

    def cut(self, host: str) -> None:
        """Takes ``host``'s link down: it can no longer reach or be reached."""
        _ip("-n", self.namespace(host), "link", "set", "eth0", "down")

    def mend(self, host: str) -> None:
        """Brings ``host``'s link up again (after :meth:`cut`)."""
        _ip("-n", self.namespace(host), "link", "set", "eth0", "up")

    def close(self) -> None:
        """Kills every process in the namespaces, removes them and their ``/etc/netns`` files."""
        for ns in reversed(self._made):
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                                  text=True).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
            shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)
        self._made.clear()
