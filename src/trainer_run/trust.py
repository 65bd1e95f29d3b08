"""Trust: a config read from a run directory is data, unless this user wrote it.

A config names code with ``_target_`` (and nnabla's per-stage hooks, ``updater.callbacks``,
with dotted names). Loading a run (``resume=``, ``load_model``) builds what its config names,
so a run directory from someone else could run any importable function. The rule, as Jupyter
has it for notebooks:

- **Built-in targets load from anyone's run**: the ``_target_`` values trainer-run's own config
  files name (:func:`builtin_targets`, e.g. ``trainer_run.optimizers.Adam``). Nothing else of
  trainer-run's counts: its helper functions are code too.
- **Every run this user writes is signed**: a per-user secret key (:func:`key_file`, made on
  first use, mode 0600, never written into a run) signs with HMAC-SHA256 the config of each
  checkpoint (``state.json``'s ``signature``) and Hydra's record (``.hydra/config.yaml``,
  signed in ``.hydra/config.sig``). A run signed with this user's key is trusted.
- **Anything else is refused before it is imported**: a config that names any other target,
  or a hook, without this user's signature raises :class:`UntrustedRun`, one line naming
  those targets and how to trust the run (``trust=true`` on the command line,
  ``load_model(run, trust=True)``), and nothing is imported, called or written.

The signature covers the config alone; what a checkpoint holds beside it (arrays, counters)
is data whatever its origin. It authenticates, it does not encrypt: anyone may read a run.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import re
import secrets
from importlib import resources
from pathlib import Path

import yaml

from .errors import ConfigError
from .storage import reading, yaml_files

TARGET = "_target_"
HOOKS = "updater.callbacks"
SIGNATURE = "signature"
"""The top-level key of a checkpoint's state that holds its config's signature."""
RECORD_SIGNATURE = "config.sig"
"""The file beside Hydra's ``config.yaml`` that holds its signature."""
SCHEME = "hmac-sha256"
KEY_BYTES = 32


class UntrustedRun(ConfigError):
    """A run's config names code outside trainer-run and this user did not sign it."""


def key_file() -> Path:
    """Where this user's key lives: ``$XDG_CONFIG_HOME/trainer-run/key``, else
    ``~/.config/trainer-run/key``."""
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "trainer-run" / "key"


def _key(create: bool) -> bytes | None:
    """This user's key; made (mode 0600, in a folder of mode 0700) when ``create`` and it does
    not exist yet. None when there is none and it is not made, the folder is not writable, or
    the file holds no key of :data:`KEY_BYTES` bytes."""
    path = key_file()
    try:
        key = bytes.fromhex(path.read_text().strip())
        return key if len(key) == KEY_BYTES else None
    except FileNotFoundError:
        if not create:
            return None
    except (OSError, ValueError):
        return None
    try:
        _make_key(path)
    except OSError:
        return None
    return _key(create=False)


def _make_key(path: Path) -> None:
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


def canonical(config: dict) -> bytes:
    """The bytes a config's signature covers: its JSON with sorted keys, as a checkpoint's
    ``state.json`` reads back."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=True).encode()


def sign(data: bytes) -> str | None:
    """``data``'s signature with this user's key (made on first use); None when no key can
    be made (an unwritable home: the run is then unsigned)."""
    key = _key(create=True)
    if key is None:
        return None
    return f"{SCHEME}:{hmac.new(key, data, hashlib.sha256).hexdigest()}"


def signed_by_me(data: bytes, signature) -> bool:
    """Whether ``signature`` is this user's signature of ``data``."""
    key = _key(create=False)
    if key is None or not isinstance(signature, str):
        return False
    expected = f"{SCHEME}:{hmac.new(key, data, hashlib.sha256).hexdigest()}"
    return hmac.compare_digest(expected.encode(), signature.encode())


@functools.lru_cache(maxsize=None)
def builtin_targets() -> frozenset:
    """The ``_target_`` values of trainer-run's own config files (read as text: nothing is
    imported to know them)."""
    found = set()
    pattern = re.compile(r"^\s*_target_:\s*(trainer_run\.[\w.]+)\s*(?:#.*)?$", re.MULTILINE)
    folder = resources.files("trainer_run.configs")
    for path in _yaml_files(folder):
        found.update(pattern.findall(path.read_text()))
    return frozenset(found)


def _yaml_files(folder) -> list:
    files = []
    for entry in folder.iterdir():
        if entry.is_dir():
            files += _yaml_files(entry)
        elif entry.name.endswith(".yaml"):
            files.append(entry)
    return files


def named_code(config) -> list[str]:
    """``key=value`` for each place ``config`` names code that is not built in: a
    ``_target_`` outside :func:`builtin_targets` anywhere in the tree (null names nothing),
    and every hook under ``updater.callbacks``."""
    found: list[str] = []
    _walk(config, "", found)
    return found


def _walk(node, key: str, found: list[str]) -> None:
    if isinstance(node, dict):
        for name, value in node.items():
            child = f"{key}.{name}" if key else str(name)
            if name == TARGET and value is not None and value not in builtin_targets():
                found.append(f"{child}={value}")
            elif child.startswith(f"{HOOKS}.") and isinstance(value, str):
                found.append(f"{child}={value}")
            else:
                _walk(value, child, found)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            if key.startswith(f"{HOOKS}.") and isinstance(value, str):
                found.append(f"{key}[{index}]={value}")
            else:
                _walk(value, f"{key}[{index}]", found)


def check(config: dict, data: bytes, signature, source: str, trusted: bool = False) -> None:
    """Refuses (:class:`UntrustedRun`) to build ``config``, read from ``source`` (``data``:
    the bytes ``signature`` signs), when it names code that is not built in and neither
    ``trusted`` (the user said so) nor this user's signature vouches for it."""
    code = named_code(config)
    if not code or trusted or signed_by_me(data, signature):
        return
    shown = ", ".join(code[:3]) + (f" and {len(code) - 3} more" if len(code) > 3 else "")
    raise UntrustedRun(f"{source} names code outside trainer-run ({shown}) and is not signed "
                       "with your key, so loading it would run code you did not write; if you "
                       "trust this run, add trust=true (in Python: load_model(run, trust=True))")


def read_record(path: Path) -> tuple[dict, bytes, str | None]:
    """A run's recorded config (``.hydra/config.yaml`` at ``path``) parsed from the very bytes
    its signature covers, those bytes, and the signature beside it (None: unsigned); a file
    that is not a YAML mapping raises ConfigError naming it. Nothing it names is imported.
    Both are read as a run's files are (:mod:`trainer_run.storage.reading`: regular files of
    a bounded size, no link on the way from the run folder) and the config without expanding
    an alias (:class:`trainer_run.storage.yaml_files.RunLoader`)."""
    path = Path(path)
    run = path.parent.parent
    try:
        data = reading.read_bytes(path, reading.CONFIG_BYTES, run)
        config = yaml_files.load_run(data, str(path))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ConfigError(f"{path} cannot be read as a run's config "
                          f"({yaml_files.problem(e)})") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{path} is not a run's config (not a mapping)")
    signature = path.with_name(RECORD_SIGNATURE)
    signed = None
    if signature.is_symlink() or signature.is_file():
        try:
            signed = reading.read_text(signature, reading.MARKER_BYTES, run).strip()
        except (OSError, UnicodeDecodeError):
            signed = None
    return config, data, signed


def checkpoint_data(state: dict) -> bytes:
    """The bytes a run checkpoint's signature covers: its ``config`` and its group
    ``choices`` (the resume pins them as arguments), canonically."""
    return canonical({"config": state.get("config"), "choices": state.get("choices")})


def check_checkpoint(state: dict, source: str, trusted: bool = False) -> None:
    """:func:`check` for a run checkpoint's state (or its JSON tree)."""
    check(state.get("config") or {}, checkpoint_data(state), state.get(SIGNATURE), source, trusted)
