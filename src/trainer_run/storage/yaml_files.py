"""Reading YAML files as OmegaConf reads them, parsed by libyaml where PyYAML has it.

:func:`read` gives the plain data ``OmegaConf.to_container(OmegaConf.load(path),
resolve=False)`` gives: YAML 1.1 with OmegaConf's scalar rules (``1e-8`` and ``1_000.5`` are
floats, dates stay strings) and a duplicate key refused, interpolations kept as written. The
command reads its own config files with it (their sections, descriptions and defaults),
many times in one start, where OmegaConf's pure-Python parser costs a large share of it; the
library reads a run's saved files with it, without OmegaConf.
"""

from __future__ import annotations

import re

import yaml

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
