"""``trainer-run --hosts FILE kvstore=dist_sync ...``: a multi-process run on the hosts of a host
file, started by ``mpiexec`` once the hosts are known to work.

The host file is MPICH's: one host per line, ``host`` or ``host:N`` for N processes on it
(``#`` starts a comment). Before anything is started or written, the command checks, in
order, each with one line and exit status 2 when it fails:

1. the file reads and every line is a host with a count of at least 1;
2. the arguments are a valid run of a ``kvstore=dist_*`` store (as a single process would
   check them);
3. ``mpiexec`` is installed;
4. every host resolves to an address;
5. on every host a process can be started the way ``mpiexec`` will start the ranks (``ssh
   HOST``, or the ``HYDRA_LAUNCHER_EXEC`` program MPICH uses instead when it is set), and
   that process can connect to this host over TCP, as the ranks must.

Then it runs ``mpiexec -f FILE -n <total> <python> -m trainer_run.cli <arguments>``, which
replaces this process: what follows is the multi-process run as ``mpiexec`` starts it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from trainer_run.console import last_said
from trainer_run.errors import ConfigError

FLAG = "--hosts"
RANK = [sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []), "-m", "trainer_run.cli"]
"""How each rank starts: ``-P`` keeps the folder the command runs in off ``sys.path`` (``-m``
puts it first), so a module planted there is not what a rank imports."""
ENV = "TRAINER_RUN_HOSTS"
"""Set for the ranks ``--hosts`` starts: the host file, for the command that resumes the run."""
PROBE_TIMEOUT_S = 30
CANNOT_CONNECT = "cannot connect: "
PROBE = f"""import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10).close()
except OSError as e:
    sys.exit("{CANNOT_CONNECT}" + (e.strerror or str(e)))
"""
"""What runs on each host: connect to this host's probe port."""


def take(argv: list[str]) -> tuple[str | None, list[str]]:
    """The host file ``--hosts FILE`` (or ``--hosts=FILE``) names, and ``argv`` without it."""
    for i, argument in enumerate(argv):
        if argument == FLAG:
            if i + 1 == len(argv) or argv[i + 1].startswith("-") or "=" in argv[i + 1]:
                raise ConfigError("--hosts needs a host file: trainer-run --hosts hosts.txt "
                                  "kvstore=dist_sync ...")
            return argv[i + 1], argv[:i] + argv[i + 2:]
        if argument.startswith(FLAG + "="):
            return argument.split("=", 1)[1], argv[:i] + argv[i + 1:]
    return None, argv


def read(path: Path) -> list[tuple[str, int]]:
    """The ``(host, processes)`` of the host file ``path``."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read the host file {path}: {getattr(e, 'strerror', None) or e}"
                          ) from None
    hosts = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        host, _, count = line.partition(":")
        if not host or " " in line or count and not (count.isdigit() and int(count) >= 1):
            raise ConfigError(f"host file {path}, line {number}: {line!r} is not a host or host:N "
                              "(N processes, at least 1)")
        hosts.append((host, int(count) if count else 1))
    if not hosts:
        raise ConfigError(f"host file {path} names no host: write one per line, host or host:N")
    return hosts


def check_store(store: str) -> None:
    """Refuses a run whose kvstore (``""``: the default, ``local``) is not a ``dist_*`` one:
    the processes would not train together."""
    store = store or "local"
    if not store.startswith("dist"):
        raise ConfigError(f"--hosts starts one process per slot of the host file, which train "
                          f"together only with kvstore=dist_sync or dist_async (not {store}); "
                          "add kvstore=dist_sync")


def mpiexec() -> str:
    """The ``mpiexec`` beside this Python (where ``pip install mpich`` puts it) or on PATH."""
    found = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
    if found is None:
        raise ConfigError("--hosts starts the ranks with mpiexec, which is not installed: "
                          "pip install 'trainer-run[mpi]' (or load your cluster's MPI)")
    return found


def check_hosts(hosts: list[tuple[str, int]], path: Path) -> None:
    """Steps 4 and 5 of the module docstring, for every host at once; the first failure in the
    file's order is the error."""
    names = list(dict.fromkeys(host for host, _ in hosts))
    for host in names:
        try:
            socket.getaddrinfo(host, None)
        except OSError as e:
            raise ConfigError(f"host file {path} names {host}, which does not resolve to an "
                              f"address ({e.strerror or e}); correct the name") from None
    me = socket.gethostname()
    with socket.create_server(("", 0), backlog=len(names) + 1) as server:
        port = server.getsockname()[1]
        with ThreadPoolExecutor(len(names)) as pool:
            failures = list(pool.map(lambda host: _probe(host, me, port), names))
    for failure in failures:
        if failure is not None:
            raise ConfigError(failure)


def _launcher() -> list[str]:
    """How ``mpiexec`` (MPICH's Hydra) reaches a host: ``HYDRA_LAUNCHER_EXEC``, else ssh."""
    chosen = os.environ.get("HYDRA_LAUNCHER_EXEC")
    return [chosen] if chosen else ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]


def _probe(host: str, me: str, port: int) -> str | None:
    """Why a rank on ``host`` could not run or connect back to ``me``, or None."""
    launcher = _launcher()
    remote = [sys.executable, "-c", PROBE, me, str(port)]
    command = (remote if host in ("localhost", me)  # mpiexec starts these ranks itself
               else [*launcher, host, *map(shlex.quote, remote)])  # a remote shell reads them again
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return (f"{host} did not answer within {PROBE_TIMEOUT_S} s ({Path(launcher[0]).name} "
                f"{host}); check that it is up")
    except OSError as e:
        return f"cannot start {launcher[0]} to reach {host}: {e.strerror or e}"
    said = last_said(done)
    if done.returncode == 0:
        return None
    if said.startswith(CANNOT_CONNECT):
        return (f"a process on {host} cannot connect to {me} (this host) over TCP: "
                f"{said.removeprefix(CANNOT_CONNECT)}; the ranks connect to each other: check the "
                "network and firewalls between the hosts")
    name = Path(launcher[0]).name
    return (f"cannot start a process on {host} with {name} ({said}); mpiexec starts the ranks "
            f"the same way, so '{name} {host} true' must work, without a password")


def launch(path: Path, hosts: list[tuple[str, int]], argv: list[str]) -> None:
    """Runs ``argv`` on ``hosts``, read from ``path`` (the module docstring's steps 3 to 5, then
    ``mpiexec``); never returns."""
    program = mpiexec()
    check_hosts(hosts, path)
    total = sum(count for _, count in hosts)
    sys.stdout.flush()
    os.environ[ENV] = str(path.absolute())
    os.execv(program, [program, "-f", str(path), "-n", str(total), *RANK, *argv])
