"""Reading TOML into frozen dataclasses, checking keys and types; every error names the file, the key and what is allowed."""

from __future__ import annotations

import collections.abc
import dataclasses
import sys
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

from edge_build.errors import ConfigError


def load_toml(path: Path) -> dict[str, Any]:
    """Read a TOML file; a missing or malformed file is a ``ConfigError``."""
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: not UTF-8 text") from exc


def from_mapping(
    cls: type,
    table: Mapping[str, Any],
    *,
    where: str,
    prefix: str = "",
    supplied: Mapping[str, Any] | None = None,
) -> Any:
    """Build the frozen dataclass ``cls`` from a TOML table, checking keys and types.

    ``where`` names the file in messages; ``prefix`` is the dotted path of a nested
    table; ``supplied`` holds fields that come from elsewhere (a profile's name is
    its file name) and may not appear in the table.
    """
    supplied = dict(supplied or {})
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in supplied}
    hints = typing.get_type_hints(cls)
    for key in table:
        if key in supplied:
            raise ConfigError(f"{where}: key '{prefix}{key}' is not allowed here (it is set to {supplied[key]!r} by edge-build)")
        if key not in fields:
            raise ConfigError(f"{where}: unknown key '{prefix}{key}' (allowed: {choices(fields)})")
    values = dict(supplied)
    for name, field in fields.items():
        key = f"{prefix}{name}"
        if name not in table:
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                raise ConfigError(f"{where}: missing key '{key}'")
            continue
        values[name] = _convert(hints[name], table[name], where=where, key=key)
    try:
        return cls(**values)
    except ValueError as exc:
        message = str(exc)
        if prefix:
            message = message.replace("key '", f"key '{prefix}", 1)
        raise ConfigError(f"{where}: {message}") from exc


def _convert(hint: Any, value: Any, *, where: str, key: str) -> Any:
    origin = typing.get_origin(hint)
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: key '{key}' must be a table")
        return from_mapping(hint, value, where=where, prefix=f"{key}.")
    if origin is Literal:
        allowed = typing.get_args(hint)
        if value not in allowed:
            raise ConfigError(f"{where}: key '{key}' is {value!r} (allowed: {', '.join(map(str, allowed))})")
        return value
    if origin is tuple:
        (item,) = {a for a in typing.get_args(hint) if a is not Ellipsis}
        if not isinstance(value, list):
            raise ConfigError(f"{where}: key '{key}' must be a list of {item.__name__}")
        return tuple(_convert(item, v, where=where, key=key) for v in value)
    if origin in (collections.abc.Mapping, dict):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: key '{key}' must be a table")
        return value
    # bool is an int in Python: a TOML ``true`` must not pass as a count.
    takes_float = hint is float or (isinstance(hint, types.UnionType) and float in typing.get_args(hint))
    if takes_float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise ConfigError(f"{where}: key '{key}' must be {_type_name(hint)}, not {type(value).__name__} {value!r}")
    return value


def _type_name(hint: Any) -> str:
    if isinstance(hint, types.UnionType):
        return " or ".join(_type_name(member) for member in typing.get_args(hint))
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(hint, str(hint))


def require_positive(options: Any, *names: str) -> None:
    for name in names:
        if getattr(options, name) <= 0:
            raise ValueError(f"key '{name}': must be greater than 0, not {getattr(options, name)}")


def choices(names: Mapping[str, Any] | typing.Iterable[str]) -> str:
    return ", ".join(names)


def require_rows(key: str, names: typing.Sequence[str], table: Mapping[str, Any], what: str, a_what: str) -> None:
    """Each of ``names`` is a row of ``table``, none twice: ``what`` names a row (``a_what`` with its article)."""
    for name in names:
        if name not in table:
            raise ValueError(f"key '{key}': unknown {what} '{name}' (allowed: {choices(table)})")
    if len(set(names)) != len(names):
        raise ValueError(f"key '{key}': lists {a_what} twice")
