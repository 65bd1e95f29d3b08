"""Files of a published data set, fetched once into a folder and checked against their md5.

:func:`fetch` ``(root, files, mirrors)`` returns the path of every file of ``files`` (name:
md5, or None for a file whose md5 is not checked) in the folder ``root``:

- A file already in ``root`` with the right md5 is used as it is (nothing is written, the
  folder may be read-only); one with another md5 is refused, naming both checksums: a
  user's file is never overwritten. (The image sets look at a user's copy before they fetch,
  and check its files' content where their md5 differs: :mod:`trainer_run.data.copies`.)
- A missing file is downloaded from the ``mirrors`` in order (its URL: mirror + name). An
  HTTP error or an unreachable mirror moves on to the next mirror (an unreachable one is not
  asked again in the same fetch); a download whose md5 differs is deleted, then the next
  mirror is tried.
- A download goes to ``<name>.part`` and is renamed to ``<name>`` only once verified, so a
  file under its final name is always complete. A download cut off (a dropped connection,
  Ctrl-C) leaves its ``.part``; the next attempt asks for the rest (an HTTP ``Range``
  request) and appends it if the server answers 206, else starts again from zero.
- A stop signal (Ctrl-C, SIGTERM) ends a download within :data:`POLL` seconds, however
  slowly the server sends, keeping its ``.part``: :class:`~trainer_run.errors.Interrupted`.
  A mirror that has not given the whole file within ``time_limit`` seconds (while it keeps
  sending, slower than ``timeout`` between reads) passes the turn to the next mirror.
- Downloads happen under an exclusive lock on ``root/.fetch.lock`` (``fcntl.flock``): of two
  runs that start together (a sweep's jobs), one downloads, the other waits and then finds
  the files there and verified. The lock file is removed when the downloads end, and so is
  ``root`` (with the folders above it made for it) when nothing was left in it: a fetch that
  found no mirror leaves nothing behind.
- While a file downloads, a progress bar on stderr shows its bytes and speed; nothing is
  printed when every file is present.
- The files a fetch writes or checks in ``root`` (each ``.part``, the lock file, a file under
  its final name) are opened only as regular files of its own, never through a symbolic link,
  and one with other hard links is never written (:mod:`trainer_run.data.download_folder`): a
  link planted there is one ConfigError naming it, before any request.

Files still missing after every mirror are one :class:`~trainer_run.errors.ConfigError`
naming them, the folder to put them in and what each mirror answered.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import queue
import re
import signal
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from trainer_run import stop_signals

from ..errors import ConfigError, Interrupted, check_number
from ..storage import files as run_files
from .download_folder import locked, open_own, own_md5, verified

USER_AGENT = "trainer-run"  # some hosts refuse urllib's default one
CHUNK = 1 << 16
MD5 = re.compile(r"[0-9a-f]{32}")
POLL = 0.25
"""Seconds between looks at stop signals and the time limit while a download waits for data."""
TIME_LIMIT = 3600.0
"""Seconds one mirror may take to give one whole file."""


class Failed(Exception):
    """One download that did not give the file: ``reason`` says why; ``unreachable`` when the
    mirror did not answer at all; ``url`` what was asked for (set by the caller)."""

    def __init__(self, reason: str, unreachable: bool = False):
        super().__init__(reason)
        self.reason, self.unreachable, self.url = reason, unreachable, ""


def fetch(root, files: dict, mirrors, timeout: float = 30.0, time_limit: float = TIME_LIMIT,
          searched=()) -> dict[str, Path]:
    """The path of each file of ``files`` (name: md5 hex digest, or None: not checked) in the
    folder ``root``, downloaded from ``mirrors`` (base URLs, tried in order) when missing; see
    the module's docstring. ``timeout``: seconds a mirror may take to connect or to send more
    data; ``time_limit``: seconds it may take to give a whole file; ``searched``: the other
    folders the caller looked in, named with ``root`` when files are still missing."""
    root = Path(root).expanduser()
    files, mirrors, limits = checked(files, mirrors, timeout, time_limit)
    if all(verified(root / name, digest) for name, digest in files.items()):
        return {name: root / name for name in files}
    with locked(root), _Bar() as bar:
        missing = [n for n, digest in files.items() if not verified(root / n, digest)]
        failures, dead = [], set()
        for name in missing:
            _fetch_one(root, name, files[name], mirrors, limits, bar, failures, dead)
    left = [n for n in missing if not (root / n).is_file()]
    if left:
        raise ConfigError(_missing_message(root, left, mirrors, failures, searched))
    return {name: root / name for name in files}


def checked(files, mirrors, timeout, time_limit=TIME_LIMIT) -> tuple[dict, list, tuple]:
    """The arguments of :func:`fetch` checked: ``files`` a mapping of names to md5 hex digests,
    ``mirrors`` a URL or a list of them, ``timeout`` and ``time_limit`` positive numbers
    (returned as the pair ``limits``); each error names the argument."""
    if not isinstance(files, dict) or not files:
        raise ConfigError(f"files must map file names to their md5, got {files!r}")
    digests = {}
    for name, digest in files.items():
        if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
            raise ConfigError(f"files: {name!r} is not a file name; name each file without a "
                              "folder")
        digests[name] = None if digest is None else str(digest).lower()
        if digest is not None and not MD5.fullmatch(digests[name]):
            raise ConfigError(f"files: the md5 of {name} must be 32 hex digits or null (not "
                              f"checked), got {digest!r}")
    mirrors = [mirrors] if isinstance(mirrors, str) else mirrors
    if not isinstance(mirrors, (list, tuple)) or not all(isinstance(m, str) for m in mirrors):
        raise ConfigError(f"mirrors must be a list of base URLs (a file's URL is the mirror and its "
                          f"name), got {mirrors!r}")
    limits = tuple(check_number(key, value, low=0, low_open=True)
                   for key, value in (("timeout", timeout), ("time_limit", time_limit)))
    return digests, list(mirrors), limits


def _fetch_one(root: Path, name: str, digest: str, mirrors: list, limits: tuple, bar,
               failures: list, dead: set) -> None:
    """Downloads ``name`` into ``root`` from the first mirror that gives it with the right md5;
    each failure is appended to ``failures`` (a :class:`Failed`), unreachable mirrors to
    ``dead``."""
    part = root / f"{name}.part"
    if _part_size(part) and digest is not None and own_md5(part) == digest:  # cut before its rename
        return _finish(part, root / name)
    for mirror in mirrors:
        if mirror in dead:
            continue
        url = mirror if mirror.endswith("/") else mirror + "/"
        url += name
        try:
            _download(url, part, limits, bar, name)
            if digest is None or (found := own_md5(part)) == digest:
                return _finish(part, root / name)
            part.unlink()
            raise Failed(f"gave md5 {found}, not {digest}")
        except Failed as e:
            e.url = url
            failures.append(e)
            if e.unreachable:
                dead.add(mirror)


def _part_size(part: Path) -> int:
    """The bytes the download ``part`` holds (0 when there is none); one that is not a file of
    the fetch's own is refused before anything is asked for (:func:`open_own`)."""
    try:
        fd = open_own(part, os.O_RDWR)
    except FileNotFoundError:
        return 0
    except OSError as e:
        raise run_files.storage_error(part, e) from None
    try:
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def _finish(part: Path, path: Path) -> None:
    try:
        os.replace(part, path)
        run_files.fsync_dir(path.parent)
    except OSError as e:
        raise run_files.storage_error(path, e) from None


def _download(url: str, part: Path, limits: tuple, bar, name: str) -> None:
    """Writes the body of ``url`` to ``part``, resuming what it holds when the server answers
    a Range request; raises :class:`Failed` when no whole body came. ``limits``: the timeout
    of a read and the time limit of the whole file."""
    timeout, time_limit = limits
    deadline = time.monotonic() + time_limit
    offset = _part_size(part)
    response = _open(url, offset, timeout)
    if offset and response.status == 416:  # the part is not a prefix of the file: start again
        response.close()
        part.unlink()
        return _download(url, part, limits, bar, name)
    if response.status != 206 or not _starts_at(response, offset):
        offset = 0
    length = response.headers.get("Content-Length")
    total = offset + int(length) if length and length.isdigit() else None
    received = _receive(response, part, offset, bar.task(name, total, offset), deadline)
    if total is not None and received < total:
        raise Failed(f"cut off after {received} of {total} bytes (kept as {part.name}; run again "
                     "to resume)")


def _open(url: str, offset: int, timeout: float):
    """The response to GET ``url`` (from byte ``offset`` on, if not 0); a 416 answer to a
    Range request is returned, any other HTTP error raises :class:`Failed`."""
    headers = {"User-Agent": USER_AGENT, **({"Range": f"bytes={offset}-"} if offset else {})}
    try:
        return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and offset:
            return e
        raise Failed(f"HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", None) or e
        raise Failed(f"unreachable ({reason})", unreachable=True) from None


def _starts_at(response, offset: int) -> bool:
    """Whether a 206 answer's Content-Range starts at ``offset``."""
    match = re.match(r"bytes (\d+)-", response.headers.get("Content-Range", ""))
    return bool(match) and int(match.group(1)) == offset


def _receive(response, part: Path, offset: int, advance, deadline: float) -> int:
    """Appends the body to ``part`` (truncated to ``offset`` bytes first); the bytes ``part``
    then holds. A dropped connection ends it early, keeping what came. The body is read on a
    thread of its own, which owns and closes ``response``, so that a stop signal or the
    ``deadline`` (``time.monotonic``) ends the wait however long the server takes between
    bytes; the reader then stops at its next block."""
    try:
        fd = open_own(part, os.O_WRONLY | os.O_CREAT)
    except OSError as e:
        response.close()
        raise run_files.storage_error(part, e) from None
    except ConfigError:
        response.close()
        raise
    blocks: queue.Queue = queue.Queue(maxsize=8)
    abandoned = threading.Event()
    threading.Thread(target=_pump, args=(response, blocks, abandoned), daemon=True).start()
    received = offset
    try:
        with os.fdopen(fd, "wb") as f:
            f.truncate(offset)
            f.seek(offset)
            while (block := _next_block(blocks, abandoned, part, deadline)):
                f.write(block)
                f.flush()  # what came is in the part, should the process end now
                received += len(block)
                advance(received)
    except OSError as e:
        abandoned.set()
        raise run_files.storage_error(part, e) from None
    return received


def _pump(response, blocks: queue.Queue, abandoned: threading.Event) -> None:
    """Puts each block of the body into ``blocks``, then ``b""`` at its end or a dropped
    connection; stops at the next block once ``abandoned``."""
    try:
        with response:
            while not abandoned.is_set() and (block := response.read1(CHUNK)):
                while not abandoned.is_set():
                    with contextlib.suppress(queue.Full):
                        blocks.put(block, timeout=POLL)
                        break
    except (OSError, ValueError, http.client.HTTPException):  # dropped, or cut short
        pass
    with contextlib.suppress(queue.Full):
        blocks.put(b"", timeout=POLL)


def _next_block(blocks: queue.Queue, abandoned: threading.Event, part: Path,
                deadline: float) -> bytes:
    """The next block (``b""``: the end), waiting in :data:`POLL` steps; a stop signal raises
    :class:`~trainer_run.errors.Interrupted`, the deadline :class:`Failed`, whether blocks
    come or not."""
    while True:
        signum = stop_signals.requested()
        if signum is not None:
            abandoned.set()
            raise Interrupted(f"stopped by {signal.Signals(signum).name} while downloading "
                              f"{part.name[:-len('.part')]}; nothing was trained; what came is "
                              f"kept in {part} and the next run resumes it", signum)
        if time.monotonic() > deadline:
            abandoned.set()
            raise Failed(f"did not finish in time (kept as {part.name}; run again to resume)")
        with contextlib.suppress(queue.Empty):
            return blocks.get(timeout=POLL)


def _missing_message(root: Path, left: list, mirrors: list, failures: list, searched) -> str:
    """The line for files ``left`` missing after ``failures`` (:class:`Failed`), having looked
    in ``root`` and the folders ``searched``."""
    them, verb = ("it", "is") if len(left) == 1 else ("them", "are")
    if failures and all(f.unreachable for f in failures):
        answered = f"no mirror answered ({', '.join(mirrors)})"
    elif failures:
        answered = f"no mirror gave {them} (" + "; ".join(f"{f.url}: {f.reason}" for f in failures) + ")"
    else:
        answered = "no mirror is set"
    elsewhere = f" (nor in {', '.join(map(str, searched))})" if searched else ""
    return (f"{', '.join(left)} {verb} not in {root}{elsewhere} and {answered}; download {them} "
            "there by hand or set dataset.root or TRAINER_RUN_DATA to a folder that has them")


class _Bar:
    """The progress bar of a fetch on stderr, shown from its first download on."""

    def __init__(self):
        self.progress = None

    def __enter__(self):
        return self

    def task(self, name: str, total: int | None, completed: int):
        """A line for the download of ``name``; returns its update function (bytes so far)."""
        if self.progress is None:
            self.progress = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                                     TransferSpeedColumn(), console=Console(stderr=True))
            self.progress.start()
        task = self.progress.add_task(name, total=total, completed=completed)
        return lambda done: self.progress.update(task, completed=done)

    def __exit__(self, *exc):
        if self.progress is not None:
            self.progress.stop()
