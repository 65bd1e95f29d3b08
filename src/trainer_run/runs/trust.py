"""Trust: a config read from a run directory is data, unless this user wrote it.

A config names code with ``_target_`` (and nnabla's per-stage hooks, ``updater.callbacks``,
with dotted names). Loading a run (``resume=``, ``load_model``) builds what its config names,
so a run directory from someone else could run any importable function. The rule, as Jupyter
has it for notebooks:

- **Built-in targets load from anyone's run**: the ``_target_`` values trainer-run's own config
  files name (:func:`builtin_targets`, e.g. ``trainer_run.optimizers.Adam``). Nothing else of
  trainer-run's counts: its helper functions are code too.
- **Every run this user writes is signed**: a per-user secret key (:func:`key_file`, made on
  first use, mode 0600, never written into a run, refused when others can read or change it:
  :mod:`trainer_run.runs.signing_key`) signs with HMAC-SHA256 the config of each
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
import re
from importlib import resources
from pathlib import Path

import yaml

from trainer_run.data.transforms import BUILT_IN
from trainer_run.errors import ConfigError
from trainer_run.runs import signing_key
from trainer_run.storage import reading, run_files, yaml_files
from trainer_run.user_code import name_of

TARGET = "_target_"
HOOKS = "updater.callbacks"
SIGNATURE = "signature"
"""The top-level key of a checkpoint's state that holds its config's signature."""
RECORD_SIGNATURE = run_files.SIGNATURE
"""The file beside Hydra's ``config.yaml`` that holds its signature."""
SCHEME = "hmac-sha256"


class UntrustedRun(ConfigError):
    """A run's config names code outside trainer-run and this user did not sign it."""


def canonical(config: dict) -> bytes:
    """The bytes a config's signature covers: its JSON with sorted keys, as a checkpoint's
    ``state.json`` reads back."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=True).encode()


def sign(data: bytes) -> str | None:
    """``data``'s signature with this user's key (made on first use); None when no key can
    be made (an unwritable home: the run is then unsigned). A key others can read or change,
    or one that holds no key, raises :class:`KeyRefused` (:mod:`trainer_run.runs.signing_key`)."""
    key = signing_key.read(create=True)
    if key is None:
        return None
    return f"{SCHEME}:{hmac.new(key, data, hashlib.sha256).hexdigest()}"


def signed_by_me(data: bytes, signature) -> bool:
    """Whether ``signature`` is this user's signature of ``data`` (:class:`KeyRefused` for a
    key that cannot be trusted, as :func:`sign`)."""
    key = signing_key.read(create=False)
    if key is None or not isinstance(signature, str):
        return False
    expected = f"{SCHEME}:{hmac.new(key, data, hashlib.sha256).hexdigest()}"
    return hmac.compare_digest(expected.encode(), signature.encode())


@functools.lru_cache(maxsize=None)
def builtin_targets() -> frozenset:
    """The ``_target_`` values of trainer-run's own config files (read as text: nothing is
    imported to know them) and the dotted paths of the built-in transforms
    (:data:`trainer_run.data.transforms.BUILT_IN`)."""
    found = {name_of(klass) for klass in BUILT_IN.values()}
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
    ``_target_`` outside :func:`builtin_targets` anywhere in the tree (null names nothing; a
    value that is not a string, a list or a mapping, is shown as not a dotted name), and every
    hook under ``updater.callbacks``."""
    found: list[str] = []
    _walk(config, "", found)
    return found


def _walk(node, key: str, found: list[str]) -> None:
    if isinstance(node, dict):
        for name, value in node.items():
            child = f"{key}.{name}" if key else str(name)
            if name == TARGET and not isinstance(value, str) and value is not None:
                found.append(f"{child}={_shown(value)} (not a dotted name)")
            elif name == TARGET and isinstance(value, str) and value not in builtin_targets():
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


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def flag(trusted) -> bool:
    """``trusted``, the user's ``trust``, which must be a bool (True or False): anything else
    (``"false"``, ``1``, None) raises ConfigError, so that no value trusts a run by accident."""
    if not isinstance(trusted, bool):
        raise ConfigError(f"trust must be True or False (a bool), got {trusted!r}; "
                          "load_model(run, trust=True) trusts the run")
    return trusted


def check(config: dict, data: bytes, signature, source: str, trusted: bool = False) -> None:
    """Refuses (:class:`UntrustedRun`) to build ``config``, read from ``source`` (``data``:
    the bytes ``signature`` signs), when it names code that is not built in and neither
    ``trusted`` (the user said so: a bool, :func:`flag`) nor this user's signature vouches
    for it."""
    if not flag(trusted) and not signed_by_me(data, signature):
        refuse_code(config, source)


def refuse_code(config: dict, source: str, exempt=()) -> None:
    """Refuses (:class:`UntrustedRun`) a ``config`` from ``source`` that names code that is not
    built in (:func:`named_code`), but for the keys under ``exempt`` (dotted keys the user's
    own command set)."""
    code = [c for c in named_code(config) if not _under(c.split("=", 1)[0], exempt)]
    if not code:
        return
    shown = ", ".join(code[:3]) + (f" and {len(code) - 3} more" if len(code) > 3 else "")
    raise UntrustedRun(f"{source} names code outside trainer-run ({shown}) and is not signed "
                       "with your key, so loading it would run code you did not write; if you "
                       "trust this run, add trust=true (in Python: load_model(run, trust=True))")


def _under(key: str, exempt) -> bool:
    return any(key == e or key.startswith(f"{e}.") or key.startswith(f"{e}[") for e in exempt)


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
