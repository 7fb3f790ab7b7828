"""The boards a build checks its bundle on: ``board=ssh://[USER@]HOST[:PORT][?python=PATH&cache=DIR]``, comma-separated.

HOST may be a ``Host`` entry of the user's ssh configuration (or of ``ssh_config=``):
the user's own OpenSSH client connects, so its configuration, agent and jump hosts
apply. Standard library only: ``SConstruct`` parses the variable with this.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from edge_build.errors import ConfigError

#: A host name, address or ssh ``Host`` entry (IPv6 inside [ ], without them here), and a login name: nothing an option or a shell reads.
SAFE_HOST = re.compile(r"[A-Za-z0-9._:%-]+")
SAFE_USER = re.compile(r"[A-Za-z0-9._-]+")
#: Where a board keeps bundles unless its address names another folder (``~`` is the board user's home).
DEFAULT_CACHE = "~/.cache/edge-build"
#: What may follow ``?`` in a board's address.
QUERY_KEYS = ("python", "cache")


@dataclasses.dataclass(frozen=True)
class Board:
    """One board, as its ``ssh://`` address names it.

    Attributes:
      host: the host name or address, or a ``Host`` entry of the ssh configuration.
      user: the login name (default: ssh's, from its configuration).
      port: the ssh port (default: ssh's).
      python: the board's Python, which needs numpy and the runtime (default ``python3`` on its PATH).
      cache: the folder on the board that keeps uploaded bundles.
    """

    host: str
    user: str | None = None
    port: int | None = None
    python: str = "python3"
    cache: str = DEFAULT_CACHE

    @property
    def destination(self) -> str:
        """What ``ssh`` connects to: ``[USER@]HOST``."""
        return f"{self.user}@{self.host}" if self.user else self.host

    @property
    def address(self) -> str:
        """The board as the user would write it, without options: ``ssh://USER@HOST:PORT``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"ssh://{self.user + '@' if self.user else ''}{host}{f':{self.port}' if self.port else ''}"

    @property
    def spec(self) -> str:
        """The whole address, options included: what ``parse_board`` reads back as this board."""
        options = {key: getattr(self, key) for key in QUERY_KEYS if getattr(self, key) != getattr(Board, key)}
        return self.address + (f"?{urlencode(options, quote_via=quote, safe='/~')}" if options else "")

    @property
    def name(self) -> str:
        """A folder name for the board's results: its address with anything but letters, digits, ``.`` and ``-`` made ``-``."""
        plain = f"{self.user + '@' if self.user else ''}{self.host}{f':{self.port}' if self.port else ''}"
        return re.sub(r"[^A-Za-z0-9.-]+", "-", plain).strip("-.") or "board"


def query_options(query: str, where: str) -> dict[str, str]:
    """The options after ``?`` in a board's address (``QUERY_KEYS``), each given once, non-empty and safe to pass on."""
    parsed = parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(parsed) - set(QUERY_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown option(s) {', '.join(unknown)} (allowed: {', '.join(QUERY_KEYS)})")
    options = {}
    for key, values in parsed.items():
        if len(values) != 1 or not values[0]:
            raise ConfigError(f"{where}: option {key} needs exactly one non-empty value")
        # Percent-escapes decode to any character: a NUL or a line break would reach the board's shell or the ssh call.
        if any(unicodedata.category(character) == "Cc" for character in values[0]) or values[0].startswith("-"):
            raise ConfigError(f"{where}: option {key} is {values[0]!r} (allowed: a path with no control character, not starting with '-')")
        options[key] = values[0]
    return options


def parse_board(text: str) -> Board:
    """One ``ssh://`` address; a malformed one raises ``ConfigError`` naming it and what is allowed."""
    allowed = "ssh://[USER@]HOST[:PORT][?python=PATH&cache=DIR]"
    where = f"board={text}"
    parts = urlsplit(text)
    if parts.scheme != "ssh":
        raise ConfigError(f"{where}: expected an ssh:// address (allowed: {allowed})")
    if parts.password is not None:
        raise ConfigError(f"{where}: a password is never passed on the command line (allowed: keys, an ssh agent or ~/.ssh/config)")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:  # ssh://host:0 would otherwise mean ssh's default port
        raise ConfigError(f"{where}: the port must be a number from 1 to 65535")
    if not parts.hostname:
        raise ConfigError(f"{where}: no host (allowed: {allowed})")
    if parts.path not in ("", "/") or parts.fragment:
        raise ConfigError(f"{where}: unexpected '{parts.path}{'#' + parts.fragment if parts.fragment else ''}' (allowed: {allowed})")
    options = query_options(parts.query, where)
    # urlsplit lowercases the host name; a Host entry of the ssh configuration keeps its case.
    host = parts.netloc.rpartition("@")[2]
    host = host[1 : host.index("]")] if host.startswith("[") else host.partition(":")[0]
    user = parts.username or None
    # ssh and scp read a word starting with "-" as an option (ssh://-oProxyCommand=...), and a shell would act on others.
    for what, value, allowed_pattern in (("host", host, SAFE_HOST), ("user", user, SAFE_USER)):
        if value is not None and (value.startswith("-") or not allowed_pattern.fullmatch(value)):
            raise ConfigError(
                f"{where}: {what} {value!r} is not a plain {what} name (allowed: letters, digits and . _ - not first{', : inside [ ]' if what == 'host' else ''})"
            )
    return Board(host, user, port, **options)


def parse_boards(text: str) -> tuple[Board, ...]:
    """Every board of a comma-separated ``board=`` value; two with the same results folder are refused."""
    boards = tuple(parse_board(part.strip()) for part in text.split(",") if part.strip())
    names = [board.name for board in boards]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(f"board={text}: names the board(s) {', '.join(repeated)} twice")
    return boards
