"""Packing a code directory without the `forge` CLI: a plain zip for the API's ``code`` part.

The walk applies what the CLI's capsule builder applies (docs/capsule.md, "What goes in"): the
defaults ``.git``, ``__pycache__/``, ``*.pyc``, ``.venv/``, ``.forge/``, then the root's
``.forgeignore`` (gitignore syntax: ``#``, ``!``, ``*``, ``?``, ``[...]``, ``**``, a leading or
middle ``/`` anchoring, a trailing ``/`` for directories), and a top-level ``.starforge/`` is
left out. Links are stored as what they point to; a link leaving the tree is an error. The
server checks the archive again and packs the capsule (docs/api.md, ``POST /api/v1/jobs``).
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
import zipfile
from pathlib import Path
from typing import List, Optional, Pattern, Tuple

from ._errors import StarForgeError

DEFAULT_IGNORES = [".git", "__pycache__/", "*.pyc", ".venv/", ".forge/"]


def _translate(pattern: str) -> str:
    out = ""
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == len(pattern):
            out += "/.*"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif c == "*":
            out += "[^/]*"
            i += 1
        elif c == "?":
            out += "[^/]"
            i += 1
        elif c == "[":
            j = pattern.find("]", i + 2)
            if j < 0:
                out += re.escape(c)
                i += 1
                continue
            body = pattern[i + 1 : j]
            if body[:1] in ("!", "^"):
                body = "^" + body[1:]
            out += "[" + body.replace("\\", "\\\\") + "]"
            i = j + 1
        elif c == "\\" and i + 1 < len(pattern):
            out += re.escape(pattern[i + 1])
            i += 2
        else:
            out += re.escape(c)
            i += 1
    return out


class Rule:
    def __init__(self, line: str) -> None:
        self.negate = line.startswith("!")
        if self.negate:
            line = line[1:]
        self.dir_only = line.endswith("/")
        line = line.rstrip("/")
        anchored = "/" in line
        line = line.lstrip("/")
        self.anchored = anchored
        self.regex: Pattern[str] = re.compile(_translate(line) + r"\Z")

    def matches(self, rel: str, is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        if self.anchored:
            return bool(self.regex.match(rel))
        return bool(self.regex.match(rel.rsplit("/", 1)[-1]))


def _rules(root: Path) -> List[Rule]:
    lines = list(DEFAULT_IGNORES)
    try:
        text = (root / ".forgeignore").read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    for raw in text.splitlines():
        line = raw
        while line.endswith(" ") and not line.endswith("\\ "):
            line = line[:-1]
        if not line or line.startswith("#"):
            continue
        if line.startswith("\\#") or line.startswith("\\!"):
            line = line[1:]
        lines.append(line)
    return [Rule(x) for x in lines]


def _ignored(rules: List[Rule], rel: str, is_dir: bool) -> bool:
    result = False
    for r in rules:
        if r.matches(rel, is_dir):
            result = not r.negate
    return result


def collect(root: Path) -> List[Tuple[str, Path]]:
    """(name in the archive, file to read) for every file of the code directory."""
    root = root.resolve()
    rules = _rules(root)
    files: List[Tuple[str, Path]] = []
    stack = [("", root)]
    while stack:
        prefix, here = stack.pop()
        try:
            entries = sorted(os.scandir(here), key=lambda e: e.name)
        except OSError as e:
            raise StarForgeError("Code", f"cannot read {here}: {e.strerror}") from None
        for entry in entries:
            rel = prefix + entry.name
            if "\\" in entry.name or any(ord(ch) < 32 for ch in entry.name):
                raise StarForgeError("Code", f"{rel}: a name with a control character or \\")
            path = Path(entry.path)
            real = path.resolve()
            if entry.is_symlink():
                if not real.exists():
                    continue  # dangling (an editor's lock): skipped, as the CLI does
                if root != real and root not in real.parents:
                    raise StarForgeError(
                        "Code", f"{rel} is a link to {os.readlink(path)}, outside the code directory"
                    )
            try:
                st = os.stat(path)
            except OSError as e:
                raise StarForgeError("Code", f"cannot read {rel}: {e.strerror}") from None
            is_dir = stat.S_ISDIR(st.st_mode)
            if _ignored(rules, rel, is_dir):
                continue
            if is_dir:
                if prefix == "" and entry.name == ".starforge":
                    continue  # regenerated in every capsule
                if entry.is_symlink() and (real == root or real in path.parent.resolve().parents):
                    raise StarForgeError("Code", f"{rel} is a link to a directory containing it")
                stack.append((rel + "/", path))
            elif stat.S_ISREG(st.st_mode):
                files.append((rel, path))
    files.sort()
    return files


def pack(root: Path, tmpdir: Optional[str] = None) -> Tuple[Path, int]:
    """The code directory as a zip in a temporary file (the caller removes it), and its count."""
    if not root.is_dir():
        raise StarForgeError(
            "Code",
            f"code directory {root} " + ("is not a directory" if root.exists() else "does not exist"),
        )
    files = collect(root)
    if not files:
        raise StarForgeError("Code", f"code directory {root} has no file to send")
    fd, name = tempfile.mkstemp(prefix="starforge-code-", suffix=".zip", dir=tmpdir)
    os.close(fd)
    try:
        with zipfile.ZipFile(name, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as z:
            for rel, path in files:
                info = zipfile.ZipInfo.from_file(path, rel)
                info.compress_type = zipfile.ZIP_DEFLATED
                with open(path, "rb") as src, z.open(info, "w") as dst:
                    while True:
                        chunk = src.read(1 << 20)
                        if not chunk:
                            break
                        dst.write(chunk)
    except BaseException:
        os.unlink(name)
        raise
    return Path(name), len(files)
