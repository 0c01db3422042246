#!/usr/bin/env python3
"""Builds runner.pyz, the in-capsule runner, as a deterministic zipapp.

The same sources give byte-identical output on any machine: entries sorted by name, a fixed
timestamp (1980-01-01 00:00:00), fixed Unix attributes (regular file, 0644), no extra fields,
DEFLATE at a fixed level, CRLF normalised to LF, and the shebang `#!/usr/bin/env python3`.
Caveat: DEFLATE output is only as stable as zlib; every classic zlib release gives the same
bytes at a given level, a zlib-ng "compat" build may not (set COMPRESSION = zipfile.ZIP_STORED
to remove that dependency).

Usage: build_zipapp.py --output runner.pyz [--source-dir DIR]
"""

import argparse
import io
import os
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "starforge_runner"
SHEBANG = b"#!/usr/bin/env python3\n"
DATE_TIME = (1980, 1, 1, 0, 0, 0)
FILE_ATTR = 0o100644 << 16  # S_IFREG | rw-r--r--, in the high 16 bits (Unix)
COMPRESSION = zipfile.ZIP_DEFLATED
COMPRESS_LEVEL = 9

# The archive's entry point. Kept free of newer syntax so that an old Python reaches the
# version check instead of a SyntaxError.
MAIN = b'''\
# StarForge runner zipapp entry point (written by runner/build_zipapp.py).
import sys

if sys.version_info < (3, 8):
    sys.stderr.write("starforge-runner: error: needs Python 3.8 or newer, this is %s\\n"
                     % sys.version.split()[0])
    sys.exit(70)

from starforge_runner.cli import main

sys.exit(main())
'''


def sources(source_dir):
    """(archive name, bytes) for every .py file of the package, sorted by archive name."""
    package_dir = os.path.join(source_dir, PACKAGE)
    if not os.path.isfile(os.path.join(package_dir, "__init__.py")):
        raise SystemExit("build_zipapp.py: %s is not the runner package" % package_dir)
    found = []
    for dirpath, dirnames, filenames in os.walk(package_dir):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        for name in filenames:
            if not name.endswith(".py"):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, source_dir).replace(os.sep, "/")
            with open(path, "rb") as f:
                data = f.read().replace(b"\r\n", b"\n")
            found.append((rel, data))
    found.append(("__main__.py", MAIN))
    return sorted(found)


def build(source_dir=HERE):
    """The zipapp's bytes."""
    out = io.BytesIO()
    out.write(SHEBANG)
    with zipfile.ZipFile(out, "w", compression=COMPRESSION, compresslevel=COMPRESS_LEVEL) as z:
        for name, data in sources(source_dir):
            info = zipfile.ZipInfo(name, date_time=DATE_TIME)
            info.create_system = 3  # Unix, whatever the building machine is
            info.external_attr = FILE_ATTR
            info.compress_type = COMPRESSION
            z.writestr(info, data, compress_type=COMPRESSION, compresslevel=COMPRESS_LEVEL)
    return out.getvalue()


def write_if_changed(path, data):
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return
    except OSError:
        pass
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Build the deterministic runner.pyz zipapp.")
    parser.add_argument("--output", required=True, help="where to write runner.pyz")
    parser.add_argument("--source-dir", default=HERE,
                        help="the directory holding the %s package (default: %s)" % (PACKAGE,
                                                                                     HERE))
    args = parser.parse_args(argv)
    data = build(args.source_dir)
    write_if_changed(args.output, data)
    os.chmod(args.output, 0o755)
    return 0


if __name__ == "__main__":
    sys.exit(main())
