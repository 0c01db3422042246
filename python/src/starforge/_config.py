"""Where the client finds its server and token: exactly as the `forge` CLI does (src/cli/client_config.cc).

Server: the argument, else ``FORGE_SERVER``, else the ``server`` that ``forge login`` saved in
``$XDG_CONFIG_HOME/starforge/config.json`` (an absolute ``XDG_CONFIG_HOME`` only) or
``~/.config/starforge/config.json``, else ``http://127.0.0.1:8080``.
Token: the argument, else ``FORGE_TOKEN``, else the saved token — only when the server in use
is the saved one (a saved token is never sent to another server).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Mapping, Optional, Tuple

from ._errors import StarForgeError

DEFAULT_SERVER = "http://127.0.0.1:8080"


def config_path(env: Mapping[str, str]) -> Optional[Path]:
    xdg = env.get("XDG_CONFIG_HOME", "")
    if xdg.startswith("/"):  # a relative XDG_CONFIG_HOME is invalid and ignored (XDG spec)
        return Path(xdg) / "starforge" / "config.json"
    home = env.get("HOME", "")
    if home:
        return Path(home) / ".config" / "starforge" / "config.json"
    return None


def load_saved(path: Optional[Path]) -> Tuple[str, str]:
    """The saved (server, token), ("", "") when there is no file."""
    if path is None:
        return "", ""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return "", ""
    except OSError as e:
        raise StarForgeError("Config", f"cannot read {path}: {e.strerror}") from None
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise StarForgeError(
            "Config", f"{path} is not a JSON object: fix it or delete it and run `forge login`"
        )
    for key in ("server", "token"):
        if key in doc and not isinstance(doc[key], str):
            raise StarForgeError("Config", f'{path}: "{key}" must be a string')
    return doc.get("server", ""), doc.get("token", "")


def normalize_server(url: str) -> str:
    """As the CLI's NormalizeServer: http:// added when no scheme, trailing slashes dropped."""
    u = url.strip(" \r\n")
    if "://" not in u:
        u = "http://" + u
    else:
        scheme, rest = u.split("://", 1)
        scheme = scheme.lower()
        if scheme not in ("http", "https"):
            raise StarForgeError("Config", f"server URL {url}: use http:// or https://")
        u = scheme + "://" + rest
    u = u.rstrip("/")
    host_start = u.find("://") + 3
    if host_start >= len(u) or u[host_start] in "/:":
        raise StarForgeError(
            "Config", f'server URL "{url}" has no host (e.g. http://127.0.0.1:8080)'
        )
    if any(c in u for c in "?# "):
        raise StarForgeError(
            "Config",
            f'server URL "{url}" must be scheme://host[:port][/path] (no query or spaces)',
        )
    if "@" in u[host_start:]:
        raise StarForgeError(
            "Config",
            "server URL must not contain credentials (user@): use `forge login` for the token",
        )
    return u


def resolve(
    server: Optional[str], token: Optional[str], env: Optional[Mapping[str, str]] = None
) -> Tuple[str, str]:
    """(server URL, token) as the CLI resolves them; the token may be ""."""
    env = os.environ if env is None else env
    saved_server, saved_token = load_saved(config_path(env))
    raw = server or env.get("FORGE_SERVER", "") or saved_server or DEFAULT_SERVER
    url = normalize_server(raw)
    if token:
        return url, token
    if env.get("FORGE_TOKEN", ""):
        return url, env["FORGE_TOKEN"]
    if saved_token:
        try:
            same = normalize_server(saved_server or DEFAULT_SERVER) == url
        except StarForgeError:
            same = False
        if same:
            return url, saved_token
    return url, ""
