"""The names the service answers to: each request's `Host` header against an allow-list.

A page on another site can make a visitor's browser send requests to 127.0.0.1 by
re-pointing its own name at that address (DNS rebinding); the browser then still sends that
name in `Host`, and treats the answers as the page's own. So the service answers only the
names it was given (`allowed_names`): the loopback names `localhost`, `127.0.0.1` and
`::1`, the address it listens on (`--host`) and any name added with `--allowed-host`, each
with any port or none. Names are compared in lower case, IPv6 addresses in their short form
(`[0:0:0:0:0:0:0:1]:8000` is `::1`). Standard library only.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_NAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")  # a DNS name or a dotted IPv4 address
_PORT = re.compile(r":[0-9]{1,5}")


class HostNameError(ValueError):
    """A name that cannot be a host name or an IP address."""


def _ipv6(text: str) -> str | None:
    """The short form of an IPv6 address, or None when `text` is none."""
    try:
        return ipaddress.IPv6Address(text).compressed
    except ValueError:
        return None


def _name(text: str) -> str | None:
    text = text.lower()
    return text if len(text) <= 253 and _NAME.fullmatch(text) else None


def header_host(value: str) -> str | None:
    """The host of a `Host` header without its port: `localhost:8000` → `localhost`,
    `[::1]:8000` → `::1`; None for a value that is not `host[:port]`."""
    if value.startswith("["):
        inside, bracket, port = value[1:].partition("]")
        if not bracket or (port and not _PORT.fullmatch(port)):
            return None
        return _ipv6(inside)
    name, colon, port = value.partition(":")
    if colon and not _PORT.fullmatch(colon + port):
        return None
    return _name(name)


def allowed_name(text: str) -> str:
    """A name for the allow-list (`--allowed-host`): a host name, an IPv4 address or an
    IPv6 address, bracketed or not, without a port; HostNameError otherwise."""
    bare = text.strip()
    if bare.startswith("[") and bare.endswith("]"):
        bare = bare[1:-1]
    found = _ipv6(bare) if ":" in bare else _name(bare)
    if found is None:
        raise HostNameError(
            f"{text!r} is not a host name or an IP address (give it without a port: "
            "every port is accepted)"
        )
    return found


def allowed_names(listen_host: str | None = None, extra: Iterable[str] = ()) -> frozenset[str]:
    """The loopback names, the address the service listens on (when it is one a Host
    header can hold) and `extra` (HostNameError for one that is not a name)."""
    names = set(LOOPBACK_NAMES) | {allowed_name(name) for name in extra}
    if listen_host is not None:
        try:
            names.add(allowed_name(listen_host))
        except HostNameError:
            pass  # no Host header can name it either
    return frozenset(names)
