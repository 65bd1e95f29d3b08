"""This user's signing key (:mod:`trainer_run.runs.trust`): where it lives, how it is made, and
when it is refused.

- **Where**: :func:`key_file`, ``$XDG_CONFIG_HOME/trainer-run/key``, else
  ``~/.config/trainer-run/key``: 64 hex digits (:data:`KEY_BYTES` bytes) and a newline.
- **Made** on first use by a command that signs (:func:`read` with ``create``): mode 0600 in
  a folder of mode 0700, linked into place whole, so that processes starting at once all
  use the one key made first.
- **Refused**, as ssh refuses a private key others can read (:class:`KeyRefused`, one line
  naming the file and the command that fixes it), whenever the key is needed, to sign or to
  verify: a key file others (group or world) can read or write (``chmod 600``); a folder
  others can write, where anyone could put a key of theirs in its place (``chmod 700``); a
  file that cannot be read, or that holds no key, e.g. cut short or edited (delete it and
  the next run makes a new one; the runs signed with the old key then load only with
  ``trust=true``). A key that is refused signs nothing and vouches for nothing, and a
  command never carries on unsigned without a word.
- **None** only where there is no key and none can be made (a read-only home): runs are
  then unsigned, and load elsewhere as anyone's do.

The modes are not checked on Windows, whose files have none.
"""

from __future__ import annotations

import os
import secrets
import shlex
import stat
from pathlib import Path

from trainer_run.errors import ConfigError

KEY_BYTES = 32
OPEN_FILE = 0o077
"""Mode bits of a key file that let others (group or world) read or write it."""
OPEN_FOLDER = 0o022
"""Mode bits of the key's folder that let others (group or world) replace the key."""


class KeyRefused(ConfigError):
    """This user's key exists but cannot be trusted or used; the message says how to fix it."""


def key_file() -> Path:
    """Where this user's key lives: ``$XDG_CONFIG_HOME/trainer-run/key``, else
    ``~/.config/trainer-run/key``."""
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "trainer-run" / "key"


def read(create: bool) -> bytes | None:
    """This user's key, made first when ``create`` and there is none; None when there is none
    and it is not made (not asked, or the folder cannot be written). Raises
    :class:`KeyRefused` for a key others can read or change, or one that holds no key."""
    path = key_file()
    _check_folder(path.parent)
    try:
        return _parse(path, _read_private(path))
    except FileNotFoundError:
        if not create:
            return None
    try:
        _make(path)
    except OSError:
        return None
    return read(create=False)


def _check_folder(folder: Path) -> None:
    try:
        mode = folder.stat().st_mode
    except OSError:
        return  # no folder yet (it is made 0700), or none that can be looked at: no key in it
    if os.name != "nt" and mode & OPEN_FOLDER:
        raise KeyRefused(f"the folder of your trainer-run key, {folder}, has mode "
                         f"{stat.S_IMODE(mode):04o}: others can replace the key in it, so it is "
                         f"not used; run: chmod 700 {shlex.quote(str(folder))}")


def _read_private(path: Path) -> str:
    """The text of ``path`` once its mode shows that no one else can read or change it."""
    try:
        mode = path.stat().st_mode
        if os.name != "nt" and mode & OPEN_FILE:
            raise KeyRefused(f"your trainer-run key {path} has mode {stat.S_IMODE(mode):04o}: "
                             "others can read or change it, so it is not used (ssh refuses "
                             f"such a key too); run: chmod 600 {shlex.quote(str(path))}")
        return path.read_text(encoding="ascii")
    except (FileNotFoundError, KeyRefused):
        raise
    except (OSError, UnicodeDecodeError) as e:
        reason = getattr(e, "strerror", None) or "it is not text"
        raise KeyRefused(f"cannot read your trainer-run key {path} ({reason}); {_remake(path)}"
                         ) from None


def _parse(path: Path, text: str) -> bytes:
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise KeyRefused(f"{path} holds no trainer-run key ({2 * KEY_BYTES} hex digits), so "
                         f"nothing can be signed or checked with it; {_remake(path)}")
    return key


def _remake(path: Path) -> str:
    return (f"delete it (rm {shlex.quote(str(path))}) and the next run makes a new key; runs "
            "signed with the old one then load only with trust=true")


def _make(path: Path) -> None:
    """Writes a new key beside ``path`` and links it into place, so that a process reading
    ``path`` sees a whole key or none; one that another process made first is kept."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".key-{os.getpid()}-{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(KEY_BYTES) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
