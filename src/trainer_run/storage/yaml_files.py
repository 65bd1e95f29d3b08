"""Reading YAML files as OmegaConf reads them, parsed by libyaml where PyYAML has it.

:func:`read` gives the plain data ``OmegaConf.to_container(OmegaConf.load(path),
resolve=False)`` gives: YAML 1.1 with OmegaConf's scalar rules (``1e-8`` and ``1_000.5`` are
floats, dates stay strings) and a duplicate key refused, interpolations kept as written. The
command reads its own config files with it (their sections, descriptions and defaults),
many times in one start, where OmegaConf's pure-Python parser costs a large share of it; the
library reads a run's saved files with it, without OmegaConf.

A file of a run folder (anyone's) is read with :func:`read_run` instead: as a regular file of
at most :data:`~trainer_run.storage.reading.CONFIG_BYTES` (:mod:`trainer_run.storage.reading`),
by :class:`RunLoader`, which refuses an alias (``*name``, a merge ``<<: *name``) where it
meets one, before what it names is built a second time. A file of nested aliases (a "billion
laughs" of a few kB) thus costs no more than its size; trainer-run's records hold none
(OmegaConf writes none, and trainer-run's config files use none).
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import yaml

from . import reading

FLOAT = re.compile(r"""^(?:
     [-+]?[0-9]+(?:_[0-9]+)*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?:[eE][-+]?[0-9]+)
    |\.[0-9]+(?:_[0-9]+)*(?:[eE][-+][0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""", re.X)
"""OmegaConf's float rule (YAML 1.1's misses ``1e-8``)."""


class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """PyYAML's safe loader with OmegaConf's scalar rules and duplicate-key check."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == yaml.resolver.BaseResolver.DEFAULT_SCALAR_TAG:
                if key_node.value in seen:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark,
                        f"found duplicate key {key_node.value}", key_node.start_mark)
                seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)


Loader.add_implicit_resolver("tag:yaml.org,2002:float", FLOAT, list("-+0123456789."))
Loader.yaml_implicit_resolvers = {
    first: [(tag, rule) for tag, rule in rules if tag != "tag:yaml.org,2002:timestamp"]
    for first, rules in Loader.yaml_implicit_resolvers.items()}


def read(path):
    """The data of the YAML file at ``path`` (an empty mapping for an empty file, as
    OmegaConf gives)."""
    with open(path, encoding="utf-8") as f:  # a stream: errors name the file
        data = yaml.load(f, Loader=Loader)
    return {} if data is None else data


class RunLoader(Loader):
    """:class:`Loader` for a file from a run folder: an alias is refused (a YAMLError naming
    the file, line and column) the moment a node would be built a second time."""

    def construct_object(self, node, deep=False):
        if node in self.constructed_objects or node in self.recursive_objects:
            raise yaml.constructor.ConstructorError(
                None, None, "found an alias (*name) or a merge of one (<<: *name), which a run's "
                "record never holds, so the file was not written by trainer-run", node.start_mark)
        return super().construct_object(node, deep=deep)


def load_run(data: bytes, name: str):
    """The data of the YAML ``data`` (bytes of a run's file ``name``, named in errors) as
    :class:`RunLoader` reads it (None for an empty file); YAMLError, UnicodeDecodeError."""
    stream = io.StringIO(data.decode("utf-8"))
    stream.name = name  # the name the parser's errors give
    loader = RunLoader(stream)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def problem(error: Exception) -> str:
    """A YAML (or other) error's message on one line (PyYAML's span several)."""
    return " ".join(str(error).split())


def read_run(path, run=None):
    """The data of the YAML file ``path`` of a run folder (``run``, when given, has the folders
    between checked for links), read as :mod:`trainer_run.storage.reading` reads a run's file
    (a regular file of at most :data:`~trainer_run.storage.reading.CONFIG_BYTES`), aliases
    refused (:class:`RunLoader`); an empty mapping for an empty file. OSError, ConfigError,
    ValueError (UnicodeDecodeError) or YAMLError say why not."""
    data = load_run(reading.read_bytes(Path(path), reading.CONFIG_BYTES, run), str(path))
    return {} if data is None else data
