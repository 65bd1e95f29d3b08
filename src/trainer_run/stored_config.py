"""A config read from disk (a run's record, a checkpoint's config), resolved as data.

A saved config keeps its interpolations as written (``base_lr: ${optimizer.learning_rate}``),
so that a resume's overrides flow through them. Resolving one with OmegaConf runs its
resolvers, and a resolver is code: ``${oc.env:TOKEN}`` reads the environment,
``${oc.decode:...}`` and ``${oc.create:...}`` make nodes (a ``_target_``) out of strings. So a
config this user did not write is resolved here, with references between its own keys only,
and what it names is checked after it is resolved (:mod:`trainer_run.runs.trust`): what is checked
is what is built.

:func:`resolve` is the one way such a config is resolved, as OmegaConf resolves references:
``${a.b}`` (absolute), ``${.b}`` and ``${..b}`` (relative to the string's own section),
``${a.0}`` / ``${a[0]}`` (a list's item), ``\\${`` (a literal ``${``); a string that is one
reference takes the referenced value, any other string the values' text. Without
``resolvers`` it refuses, each in one line naming the key, a resolver call and a reference
whose key is itself an interpolation. Always, before anything is resolved, it refuses a cycle
of references and a config whose resolved size would exceed :data:`MAX_EXPANDED` (references
that copy a section many times over grow as YAML anchors do). A config this user vouches for
that calls resolvers is resolved by OmegaConf itself.
"""

from __future__ import annotations

import re

from .errors import ConfigError

MAX_EXPANDED = 1_000_000
"""The most values and characters a resolved config may hold; trainer-run's own hold a few
thousand."""
RESOLVER = re.compile(r"\s*[A-Za-z_][\w\-]*(\.[A-Za-z_][\w\-]*)*\s*:")
KEY_PART = re.compile(r"[^.\[\]]+")


def resolve(tree: dict, source: str, resolvers: bool = False) -> dict:
    """``tree`` (plain containers, as read) with every interpolation resolved, for a config
    read from ``source`` (named in errors); ``resolvers``: the user vouches for it, so it may
    call OmegaConf's resolvers. Raises ConfigError, one line."""
    found = _Tree(tree, source, resolvers)
    if found.dynamic:
        return _by_omegaconf(tree, source)
    return found.value(())


def check(tree: dict, source: str, resolvers: bool = False) -> None:
    """Refuses (ConfigError, one line) what :func:`resolve` refuses, resolving nothing."""
    _Tree(tree, source, resolvers)


def _by_omegaconf(tree: dict, source: str) -> dict:
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        return OmegaConf.to_container(OmegaConf.create(tree), resolve=True)
    except RecursionError:
        raise ConfigError(f"{source}: its interpolations nest too deeply to resolve") from None
    except OmegaConfBaseException as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ConfigError(f"{source}: an interpolation cannot be resolved ({reason})") from None


def _interpolations(text: str):
    """``(start, end, inner)`` for each outermost ``${...}`` of ``text`` (``\\${`` is none)."""
    i = 0
    while (i := text.find("${", i)) >= 0:
        if i > 0 and text[i - 1] == "\\":
            i += 2
            continue
        depth, j = 0, i
        while j < len(text):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0 and text[j] == "}":
                break
            j += 1
        yield i, j + 1, text[i + 2:j]
        i = j + 1


class _Tree:
    """``tree``'s references, checked: each string's references (``(dots, parts)``), and
    whether any calls a resolver or names its key through another (:attr:`dynamic`: only
    OmegaConf resolves those, and only with ``resolvers``)."""

    def __init__(self, tree: dict, source: str, resolvers: bool):
        self.tree, self.source, self.resolvers = tree, source, resolvers
        self.dynamic = False
        self.references = {path: self._parse(path, text) for path, text in _strings(tree, ())}
        self.cost: dict = {}
        self.visiting: list = []
        if self._cost(()) > MAX_EXPANDED:
            raise ConfigError(f"{source}: its interpolations would expand it beyond "
                              f"{MAX_EXPANDED:,} values; it is not a config trainer-run wrote")

    def _parse(self, path: tuple, text: str) -> list:
        found = []
        for start, end, inner in _interpolations(text):
            if RESOLVER.match(inner) or "${" in inner:
                what = ("calls a resolver" if RESOLVER.match(inner)
                        else "names a key through another interpolation")
                if not self.resolvers:
                    raise ConfigError(
                        f"{self.source}: {_name(path)} {what} ({text[start:end]}), which a config "
                        "not signed with your key may not do (it could read your environment or "
                        "build code from a string); if you trust this run, add trust=true")
                self.dynamic = True
                found.append(None)
                continue
            key = inner.strip()
            dots = len(key) - len(key.lstrip("."))
            found.append((dots, tuple(KEY_PART.findall(key)), start, end))
        return found

    def raw(self, path: tuple):
        node = self.tree
        for part in path:
            node = node[part]
        return node

    def whole(self, path: tuple) -> bool:
        """Whether the string at ``path`` is exactly one reference."""
        refs = self.references.get(path) or []
        return (len(refs) == 1 and refs[0] is not None and refs[0][2] == 0
                and refs[0][3] == len(self.raw(path)))

    def follow(self, path: tuple, reference) -> tuple | None:
        """The path a reference of the string at ``path`` leads to, through keys whose value is
        one reference; None when it leads to no key of the tree."""
        if reference is None or reference[0] > len(path):
            return None
        dots, parts = reference[:2]
        where = path[:-1][:len(path) - dots] if dots else ()
        for part in parts:
            while self.whole(where):
                self._cost(where)  # a cycle through it is refused
                where = self.follow(where, self.references[where][0])
                if where is None:
                    return None
            node = self.raw(where)
            if isinstance(node, dict) and part in node:
                where = (*where, part)
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                where = (*where, int(part))
            else:
                return None
        return where

    def _cost(self, path: tuple) -> int:
        """The size of the value at ``path`` once resolved, counted without resolving it; a
        cycle of references is refused."""
        if path in self.cost:
            return self.cost[path]
        if path in self.visiting:
            cycle = self.visiting[self.visiting.index(path):] + [path]
            raise ConfigError(f"{self.source}: its interpolations form a cycle "
                              f"({' -> '.join(_name(p) for p in cycle)})")
        self.visiting.append(path)
        value = self.raw(path)
        if isinstance(value, (dict, list)):
            keys = value if isinstance(value, dict) else range(len(value))
            total = 1 + sum(self._cost((*path, k)) for k in keys)
        elif path in self.references:
            total = len(value) + sum(self._cost(target) if target is not None else 1
                                     for target in (self.follow(path, ref)
                                                    for ref in self.references[path]))
        else:
            total = 1 + (len(value) if isinstance(value, str) else 0)
        self.visiting.pop()
        self.cost[path] = min(total, MAX_EXPANDED + 1)
        return self.cost[path]

    def value(self, path: tuple):
        """The value at ``path`` resolved (after :meth:`_cost` has bounded it)."""
        value = self.raw(path)
        if isinstance(value, dict):
            return {k: self.value((*path, k)) for k in value}
        if isinstance(value, list):
            return [self.value((*path, i)) for i in range(len(value))]
        if path not in self.references:
            return value
        if self.whole(path):
            return self.value(self._target(path, self.references[path][0]))
        pieces, at = [], 0
        for ref in self.references[path]:
            pieces += [value[at:ref[2]].replace("\\${", "${"),
                       str(self.value(self._target(path, ref)))]
            at = ref[3]
        return "".join(pieces) + value[at:].replace("\\${", "${")

    def _target(self, path: tuple, reference) -> tuple:
        target = self.follow(path, reference)
        if target is None:
            raise ConfigError(f"{self.source}: {_name(path)} refers to "
                              f"{self.raw(path)[reference[2]:reference[3]]}, which names no key "
                              "of the config")
        return target


def _strings(node, path: tuple):
    if isinstance(node, dict):
        for name, value in node.items():
            yield from _strings(value, (*path, name))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _strings(value, (*path, index))
    elif isinstance(node, str) and "${" in node:
        yield path, node


def _name(path: tuple) -> str:
    return ".".join(map(str, path)) or "<root>"
