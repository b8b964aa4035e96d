"""What ``cotenant agent`` builds from its options: the API's listen address and bearer token,
the co-location policy ``run`` drives, and the client call the other commands make to the API.
"""

from __future__ import annotations

import http.client
import json
import secrets
import urllib.error
import urllib.request
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cotenant.agent.colocation import check_enforceable
from cotenant.errors import CotenantError, InputError, check_seconds
from cotenant.policies.colocation import (
    COLOCATION,
    ColocationPolicy,
    DynamicShare,
    Mechanism,
    check_share_pct,
)
from cotenant.runtime import GateSettings

DYNAMIC = ("muxflow", "cotenant-pause")
"""The registered policies that size the online share on its load (:class:`DynamicShare`)."""


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` as (host, port); an IPv6 host goes in brackets, ``[::1]:8470``."""
    host, sep, port = text.rpartition(":")
    if (not sep or not host or not (port.isascii() and port.isdigit())
            or not 0 <= int(port) <= 65535):
        raise InputError("--listen", f"{text!r} is not HOST:PORT", hint="e.g. 127.0.0.1:8470")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise InputError("--listen", f"{text!r}: an IPv6 host goes in brackets",
                         hint="e.g. [::1]:8470")
    return host, int(port)


def read_token(path: Path) -> str:
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise InputError(str(path), f"cannot read the token: {exc.strerror}",
                         hint="pass --token-file, or start `cotenant agent run` first") from exc
    if not token:
        raise InputError(str(path), "token file is empty")
    return token


def ensure_token(path: Path) -> str:
    """The token in ``path``, created (random, mode 0600, in a directory made 0700) when the
    file does not exist."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(32) + "\n", encoding="utf-8")
    return read_token(path)


@dataclass(frozen=True)
class PolicyOptions:
    """``agent run``'s settings of its co-location policy (None: the policy's own)."""

    online_share: int | None = None
    min_online_share: int | None = None
    load_window_s: float | None = None
    guard: bool | None = None
    pause_s: float | None = None
    scrape_s: float | None = None


def colocation_policy_of(name: str, options: PolicyOptions = PolicyOptions()) -> ColocationPolicy:
    """The co-location policy ``agent run`` drives: ``name`` from :data:`COLOCATION` (or
    ``module:attr``) with ``options``, each refused with one line where the policy has no
    such setting; one the agent cannot enforce is refused too."""
    builtin = COLOCATION.canonical(name) if ":" not in name else None
    kwargs: dict[str, object] = {}
    if options.online_share is not None:
        if builtin != "mps-fixed":
            raise InputError("--online-share", f"is a setting of the mps-fixed policy, not "
                             f"{name!r}", hint="use --policy mps-fixed")
        kwargs["share"] = check_share_pct(options.online_share, "--online-share")
    if options.guard is not None:
        if builtin != "mps-fixed":
            raise InputError("--guard", f"is a setting of the mps-fixed policy, not {name!r} "
                             "(the others have their own guard)", hint="leave it out")
        kwargs["guard"] = options.guard
    if options.min_online_share is not None:
        if builtin not in DYNAMIC:
            raise InputError("--min-online-share", f"is a setting of the dynamic share "
                             f"sizing ({', '.join(DYNAMIC)}), not {name!r}",
                             hint="use --policy cotenant-pause")
        floor = check_share_pct(options.min_online_share, "--min-online-share")
        kwargs["share"] = DynamicShare(min_share=floor)
    policy = COLOCATION.create(name, **kwargs)
    if not isinstance(policy, ColocationPolicy):  # a plugin that is something else
        raise InputError("--policy", f"{name!r} made a {type(policy).__name__}, not a "
                         "co-location policy (cotenant.policies.colocation.ColocationPolicy)")
    check_enforceable(policy)
    if options.load_window_s is not None:
        window = check_seconds(options.load_window_s, "--share-window-s", positive=True)
        policy = policy.with_(load_window_s=window)
    return _with_guard(policy, options)


def _with_guard(policy: ColocationPolicy, options: PolicyOptions) -> ColocationPolicy:
    if options.pause_s is None and options.scrape_s is None:
        return policy
    guard = policy.guard
    if guard is None:
        flag = "--guard-pause-s" if options.pause_s is not None else "--scrape-interval-s"
        raise InputError(flag, f"is a setting of the compute guard, which policy "
                         f"{policy.name!r} does not have",
                         hint="add --guard (mps-fixed), or use --policy cotenant-pause")
    return policy.with_(guard=replace(
        guard, pause_s=guard.pause_s if options.pause_s is None else options.pause_s,
        scrape_s=guard.scrape_s if options.scrape_s is None else options.scrape_s))


def runtime_settings(policy: ColocationPolicy, lease_s: float | None,
                     max_hold_s: float | None, floor: float | None) -> GateSettings | None:
    """The priority runtime's settings from ``--priority-*`` (the defaults where none is
    given); an error naming the option where one is out of range or the policy does not share
    by priority."""
    given = {name: value for name, value in (("lease_s", lease_s), ("max_hold_s", max_hold_s),
                                             ("floor", floor)) if value is not None}
    flags = {"lease_s": "--priority-lease-s", "max_hold_s": "--priority-max-hold-s",
             "floor": "--priority-floor"}
    if policy.mechanism is not Mechanism.PRIORITY:
        if given:
            raise InputError(flags[next(iter(given))], "is a setting of the priority runtime, "
                             f"which policy {policy.name!r} does not use",
                             hint="use --policy priority or cotenant-priority")
        return None
    try:
        return GateSettings(**given)
    except ValueError as exc:
        name = next(n for n in given if n in str(exc))
        raise InputError(flags[name], str(exc)) from None


class AgentReplyError(CotenantError):
    """The agent answered with an HTTP error ``code``."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def call_agent(url: str, token: str, method: str, path: str, body: object = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    try:
        request = urllib.request.Request(url.rstrip("/") + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {token}")
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            reply = json.loads(exc.read())
            message = reply.get("error", exc.reason) if isinstance(reply, dict) else exc.reason
        except ValueError:
            message = exc.reason
        finally:
            exc.close()
        raise AgentReplyError(f"agent at {url}: HTTP {exc.code}: {message}", exc.code) from exc
    except (urllib.error.URLError, OSError) as exc:
        raise CotenantError(f"cannot reach the agent at {url}: {exc}",
                            hint="is `cotenant agent run` running? check --url") from exc
    except (ValueError, http.client.HTTPException) as exc:  # a URL urllib refuses (a port
        # that is not a number), or a reply that is not JSON
        raise InputError(f"--url {url}", f"{exc!s:.120}") from exc
