"""The capsule's manifest: loading, verification against the unpacked files, mode restoration.

Format (version 1), at `.starforge/manifest.json` relative to the capsule root:

    {"version": 1,
     "files": [{"path": "train.py", "size": 123, "sha256": "<64 lower-case hex>",
                "executable": false}, ...]}

`files` lists every file of the capsule except `.starforge/manifest.json` itself (so
`.starforge/jobspec.json` and `.starforge/runner.pyz` are listed). Paths are relative to the
capsule root and use '/'. Unknown keys are ignored; an unknown version is an error.
"""

import hashlib
import json
import os
import stat

STARFORGE_DIR = ".starforge"
MANIFEST_PATH = STARFORGE_DIR + "/manifest.json"
SUPPORTED_VERSION = 1
_HEX_DIGITS = frozenset("0123456789abcdef")
_CHUNK = 1 << 20
# How many names a report lists before it says "and N more".
_MAX_LISTED = 20


class ManifestError(Exception):
    """The manifest itself is missing or malformed."""


class Entry(object):
    __slots__ = ("path", "size", "sha256", "executable")

    def __init__(self, path, size, sha256, executable):
        self.path = path
        self.size = size
        self.sha256 = sha256
        self.executable = executable


class Report(object):
    """What verification found. `problems` make the capsule unusable; `unlisted` are user
    files present on disk but absent from the manifest (reported, not fatal)."""

    def __init__(self):
        self.problems = []
        self.unlisted = []
        self.checked = 0
        self.bytes = 0

    @property
    def ok(self):
        return not self.problems


def _native(root, path):
    return os.path.join(root, *path.split("/"))


def _check_path(path, where):
    if not isinstance(path, str) or not path:
        raise ManifestError("%s: \"path\" must be a non-empty string" % where)
    if path.startswith("/") or "\\" in path or "\0" in path:
        raise ManifestError("%s: path %r must be relative and use '/'" % (where, path))
    for part in path.split("/"):
        if part in ("", ".", ".."):
            raise ManifestError("%s: path %r has an empty, '.' or '..' component" % (where, path))
    if path == MANIFEST_PATH:
        raise ManifestError("%s: the manifest must not list itself" % where)


def parse(text):
    """Parses manifest JSON text into a list of Entry, sorted by path."""
    try:
        doc = json.loads(text)
    except ValueError as err:
        raise ManifestError("%s: not valid JSON (%s)" % (MANIFEST_PATH, err)) from err
    if not isinstance(doc, dict):
        raise ManifestError("%s: expected a JSON object" % MANIFEST_PATH)
    version = doc.get("version")
    if version != SUPPORTED_VERSION or isinstance(version, bool):
        raise ManifestError(
            "%s: version %s is not supported (this runner reads version %d)"
            % (MANIFEST_PATH, json.dumps(version), SUPPORTED_VERSION))
    files = doc.get("files")
    if not isinstance(files, list):
        raise ManifestError("%s: \"files\" must be a list" % MANIFEST_PATH)
    entries = {}
    for index, item in enumerate(files):
        where = "%s: files[%d]" % (MANIFEST_PATH, index)
        if not isinstance(item, dict):
            raise ManifestError("%s: expected an object" % where)
        path = item.get("path")
        _check_path(path, where)
        size = item.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ManifestError("%s (%s): \"size\" must be a non-negative integer" % (where, path))
        digest = item.get("sha256")
        if not isinstance(digest, str) or len(digest) != 64 or not set(digest) <= _HEX_DIGITS:
            raise ManifestError(
                "%s (%s): \"sha256\" must be 64 lower-case hex digits" % (where, path))
        executable = item.get("executable")
        if not isinstance(executable, bool):
            raise ManifestError("%s (%s): \"executable\" must be true or false" % (where, path))
        if path in entries:
            raise ManifestError("%s: %s is listed twice" % (MANIFEST_PATH, path))
        entries[path] = Entry(path, size, digest, executable)
    # A file cannot also be a directory: "a" and "a/b" together are contradictory.
    for path in entries:
        parent = path.rsplit("/", 1)[0] if "/" in path else None
        while parent is not None:
            if parent in entries:
                raise ManifestError("%s: %s is listed as a file and as a directory of %s"
                                    % (MANIFEST_PATH, parent, path))
            parent = parent.rsplit("/", 1)[0] if "/" in parent else None
    return [entries[p] for p in sorted(entries)]


def load(root):
    """Reads and parses <root>/.starforge/manifest.json."""
    try:
        with open(_native(root, MANIFEST_PATH), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise ManifestError(
            "%s is missing under %s (run the runner from the unpacked capsule's root)"
            % (MANIFEST_PATH, root)) from None
    except OSError as err:
        raise ManifestError("%s: cannot read: %s" % (MANIFEST_PATH, err.strerror or err)) from err
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ManifestError("%s: not UTF-8" % MANIFEST_PATH) from None
    return parse(text)


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            chunk = f.read(_CHUNK)
            if not chunk:
                break
            digest.update(chunk)
    return digest.hexdigest()


def _walk_files(root):
    """Every non-directory under root (symlinks included, never followed), as '/' paths."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel = os.path.relpath(dirpath, root)
        prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        for name in filenames:
            found.append(prefix + name)
        # os.walk lists symlinks to directories among dirnames without descending into them.
        for name in dirnames:
            if os.path.islink(os.path.join(dirpath, name)):
                found.append(prefix + name)
    return found


def verify(root, entries):
    """Checks every entry's presence, type, size and SHA-256 and looks for unlisted files."""
    report = Report()
    listed = set()
    for entry in entries:
        listed.add(entry.path)
        path = _native(root, entry.path)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            report.problems.append("%s: missing (listed in the manifest)" % entry.path)
            continue
        except OSError as err:
            report.problems.append("%s: cannot inspect: %s" % (entry.path, err.strerror or err))
            continue
        if not stat.S_ISREG(st.st_mode):
            report.problems.append("%s: not a regular file" % entry.path)
            continue
        if st.st_size != entry.size:
            report.problems.append("%s: size is %d bytes, the manifest says %d"
                                   % (entry.path, st.st_size, entry.size))
            continue
        try:
            actual = _sha256(path)
        except OSError as err:
            report.problems.append("%s: cannot read: %s" % (entry.path, err.strerror or err))
            continue
        if actual != entry.sha256:
            report.problems.append("%s: content changed (sha256 %s, the manifest says %s)"
                                   % (entry.path, actual, entry.sha256))
            continue
        report.checked += 1
        report.bytes += st.st_size
    for path in sorted(_walk_files(root)):
        if path in listed or path == MANIFEST_PATH:
            continue
        if path.startswith(STARFORGE_DIR + "/"):
            report.problems.append("%s: not in the manifest (nothing may be added under %s/)"
                                   % (path, STARFORGE_DIR))
        else:
            report.unlisted.append(path)
    return report


def summarize_unlisted(unlisted):
    """One line naming files found on disk that the manifest does not list."""
    shown = ", ".join(unlisted[:_MAX_LISTED])
    more = len(unlisted) - _MAX_LISTED
    if more > 0:
        shown += ", and %d more" % more
    noun = "file" if len(unlisted) == 1 else "files"
    return ("note: %d %s in the capsule directory %s not in its manifest (left alone; "
            "only .starforge/ must match exactly): %s"
            % (len(unlisted), noun, "is" if len(unlisted) == 1 else "are", shown))


def wanted_mode(mode, executable):
    """The permission bits a file should have: x wherever r is set when executable, no x
    otherwise."""
    if executable:
        readable = mode & 0o444
        return mode | (readable >> 2) | (0 if readable else 0o100)
    return mode & ~0o111


def restore_modes(root, entries):
    """Makes each listed file executable or not as the manifest says (Ray's unzip drops
    mode bits). Returns a list of warnings for files whose mode could not be changed."""
    warnings = []
    for entry in entries:
        path = _native(root, entry.path)
        try:
            st = os.stat(path)
            mode = stat.S_IMODE(st.st_mode)
            new = wanted_mode(mode, entry.executable)
            if new != mode:
                os.chmod(path, new)
        except OSError as err:
            warnings.append("%s: cannot set its mode: %s" % (entry.path, err.strerror or err))
    return warnings
