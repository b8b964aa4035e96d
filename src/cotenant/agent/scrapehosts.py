"""Which hosts the agent may read an online service's latency histogram from.

A spec's ``latency_metric`` URL makes the agent issue GET requests: left open, a token holder
could point it at any host the node reaches (a cloud metadata address, an internal admin
page). The agent reads only from loopback and from this node's own addresses (what its host
name resolves to), plus the hosts, addresses and networks given (``--scrape-hosts``). A host
name is allowed where every address it resolves to is; it is checked when the spec is
submitted (a clear 400) and again before every read (a name may come to resolve elsewhere).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from cotenant.agent.latency import Fetch
from cotenant.errors import InputError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def own_addresses() -> set[Address]:
    """The addresses this node's host name (short and fully qualified) resolves to."""
    found: set[Address] = set()
    for name in {socket.gethostname(), socket.getfqdn()}:
        try:
            infos = socket.getaddrinfo(name, None)
        except OSError:
            continue
        for info in infos:
            try:
                found.add(ipaddress.ip_address(str(info[4][0]).split("%")[0]))
            except ValueError:
                continue
    return found


class ScrapeHosts:
    """The allow-list: loopback, this node's addresses, and ``extra`` (host names, addresses
    or networks such as ``10.0.0.0/8``)."""

    def __init__(self, extra: Iterable[str] = (), own: set[Address] | None = None) -> None:
        self.networks: list[Network] = []
        self.names: set[str] = set()
        for given in extra:
            item = given.strip()
            if not item:
                continue
            try:
                self.networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                if not all(part.isalnum() or part == "" for part in
                           item.replace("-", "").replace("_", "").split(".")):
                    raise InputError("--scrape-hosts", f"{item!r} is not a host name, "
                                     "address or network") from None
                self.names.add(item.lower())
        self.own = own_addresses() if own is None else own

    def allowed_address(self, address: Address) -> bool:
        return (address.is_loopback or address in self.own
                or any(address in net for net in self.networks))

    def check(self, url: str, where: str = "latency_metric.url") -> None:
        """Raise :class:`InputError` unless the agent may read ``url``."""
        host = (urlsplit(url).hostname or "").lower()
        if host in self.names or host == "localhost":
            return
        try:
            addresses = {ipaddress.ip_address(host.split("%")[0])}
        except ValueError:
            try:
                infos = socket.getaddrinfo(host, None)
            except OSError as exc:
                raise InputError(where, f"host {host!r} does not resolve ({exc})") from None
            addresses = {ipaddress.ip_address(str(i[4][0]).split("%")[0]) for i in infos}
        refused = sorted(str(a) for a in addresses if not self.allowed_address(a))
        if refused or not addresses:
            raise InputError(where, f"host {host!r} ({', '.join(refused)}) is neither loopback "
                             "nor this node, nor in --scrape-hosts",
                             hint="add it with --scrape-hosts")

    def guard(self, fetch: Fetch) -> Fetch:
        """``fetch`` that reads only an allowed URL."""
        def guarded(url: str, timeout_s: float) -> str:
            self.check(url)
            return fetch(url, timeout_s)
        return guarded
