"""The one YAML loader of spec files (cluster specs, workflow specs, CLI values).

PyYAML's safe loader only, limited while the document is composed: at most
:data:`MAX_DEPTH` levels of nesting, no recursive alias, and at most
:data:`MAX_NODES` nodes once aliases are expanded ("billion laughs").  Numbers
follow YAML 1.2 as well as 1.1: ``1e-3`` (no dot) is a float, not a string.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from distsketch.errors import ConfigError

__all__ = ["MAX_DEPTH", "MAX_NODES", "load_yaml", "loads_yaml"]

#: deepest nesting of mappings and lists a spec may have
MAX_DEPTH = 100
#: most nodes a spec may hold with every alias expanded
MAX_NODES = 100_000

# YAML 1.2 core floats that YAML 1.1 reads as text: an exponent without a dot (1e-3, 1E+2)
_EXP_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")


class _LimitError(yaml.YAMLError):
    """A document refused by a limit of :class:`_LimitedLoader` (message without the place)."""


class _LimitedLoader(yaml.SafeLoader):
    """SafeLoader that limits depth, refuses recursive aliases and counts expanded nodes."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._open: list[str | None] = []  # anchors of the nodes being composed

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            anchor = self.peek_event().anchor
            if anchor in self._open:
                raise _LimitError(f"recursive alias *{anchor} (it refers to a node that contains "
                                  "it); write the value out instead")
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _LimitError(f"nested more than {MAX_DEPTH} levels deep")
        anchor = getattr(self.peek_event(), "anchor", None)
        self._open.append(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._open.pop()
            self._depth -= 1

    def get_single_node(self) -> Any:
        node = super().get_single_node()
        if node is not None:
            _count_nodes(node, {})
        return node


_LimitedLoader.add_implicit_resolver("tag:yaml.org,2002:float", _EXP_FLOAT,
                                     list("-+0123456789"))


def _count_nodes(node: Any, memo: dict[int, int]) -> int:
    """Nodes under ``node`` with aliases expanded (shared nodes counted once per use)."""
    key = id(node)
    if key in memo:
        return memo[key]
    total = 1
    if isinstance(node, yaml.SequenceNode):
        total += sum(_count_nodes(child, memo) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        total += sum(_count_nodes(k, memo) + _count_nodes(v, memo) for k, v in node.value)
    if total > MAX_NODES:
        raise _LimitError(f"its aliases expand to more than {MAX_NODES} values (an alias bomb?); "
                          "write the values out, without nested aliases")
    memo[key] = total
    return total


def loads_yaml(text: str, where: str = "YAML text") -> Any:
    """Parse YAML text safely, within the limits of this module.

    Raises
    ------
    ConfigError
        The text is not valid YAML, is nested too deeply, has a recursive
        alias or expands beyond :data:`MAX_NODES`; the message names ``where``.
    """
    try:
        # a SafeLoader subclass: no Python objects are constructed
        return yaml.load(text, Loader=_LimitedLoader)
    except _LimitError as exc:
        raise ConfigError(f"{where} is refused: {exc}.") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where} is not valid YAML: {exc}") from exc
    except ValueError as exc:  # a value PyYAML cannot construct: 2001-13-45, a 5000-digit int
        raise ConfigError(f"{where} holds a value that cannot be read ({exc}); quote it to "
                          "make it text, or write it as a shorter number.") from None
    except RecursionError:  # a limit above should come first; never a traceback
        raise ConfigError(f"{where} is refused: nested more than Python can read; flatten "
                          "it.") from None


def load_yaml(path: str | os.PathLike, what: str = "spec", hint: str = "") -> Any:
    """Read a YAML file safely.

    Parameters
    ----------
    path : path-like
        The file.
    what : str
        What the file is, for messages ("cluster spec", "workflow spec").
    hint : str
        Where to look for examples, appended to the missing-file message.

    Returns
    -------
    Any
        The parsed document (usually a dict).

    Raises
    ------
    ConfigError
        The file is missing, unreadable, not valid YAML or beyond the limits
        of :func:`loads_yaml`, naming the path.
    """
    p = Path(path).expanduser()
    where = f"{what} {p}"
    if not p.exists():
        raise ConfigError(f"{where} does not exist{'; ' + hint if hint else ''}.")
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where} cannot be read: {exc}.") from exc
    return loads_yaml(text, where)
