"""What ``cotenant agent`` builds from its options: the API's listen address and bearer token,
the share policy ``run`` drives, and the client call the other commands make to the API.
"""

from __future__ import annotations

import http.client
import json
import secrets
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from cotenant.agent.share import SHARE_POLICIES
from cotenant.errors import CotenantError, InputError
from cotenant.policies.colocation.contract import SharePolicy, check_share_pct


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
    """The token in ``path``, created (random, mode 0600) when the file does not exist."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(32) + "\n", encoding="utf-8")
    return read_token(path)


def share_policy_of(
    name: str, online_share: int | None, min_online_share: int | None
) -> SharePolicy:
    """The share policy ``agent run`` drives: ``--online-share`` goes to the static policy,
    ``--min-online-share`` to the dynamic one (a plugin, ``module:attr``, takes neither)."""
    builtin = SHARE_POLICIES.canonical(name) if ":" not in name else None
    kwargs: dict[str, object] = {}
    if online_share is not None:
        if builtin != "static":
            raise InputError("--online-share", f"is a setting of the static share policy, not "
                             f"{name!r}", hint="use --share-policy static")
        kwargs["online_pct"] = check_share_pct(online_share, "--online-share")
    if min_online_share is not None:
        if builtin != "dynamic":
            raise InputError("--min-online-share", f"is a setting of the dynamic share "
                             f"policy, not {name!r}", hint="use --share-policy dynamic")
        kwargs["min_share"] = check_share_pct(min_online_share, "--min-online-share")
    policy = SHARE_POLICIES.create(name, **kwargs)
    if not callable(getattr(policy, "online_share", None)):  # a plugin that is something else
        raise InputError("--share-policy", f"{name!r} made a {type(policy).__name__}, which has "
                         "no online_share(observation) method")
    return policy


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
