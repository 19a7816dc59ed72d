"""The one YAML loader of spec files (cluster specs, workflow specs, CLI values).

Only ``yaml.safe_load`` is used: a spec never constructs Python objects.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from distsketch.errors import ConfigError

__all__ = ["load_yaml", "loads_yaml"]


def loads_yaml(text: str, where: str = "YAML text") -> Any:
    """Parse YAML text safely.

    Raises
    ------
    ConfigError
        The text is not valid YAML; the message names ``where``.
    """
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where} is not valid YAML: {exc}") from exc


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
        The file is missing, unreadable or not valid YAML, naming the path.
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
