"""An emulation of Ray's ``cli_logger`` output.

When stdout is not a terminal (always the case in a pod) Ray's cli_logger writes records
in LOGGER_FORMAT, e.g. ``2026-03-25 15:05:37,914\\tSUCC cli.py:66 -- Job 'x' submitted
successfully``; blank lines and indentation are dropped. On a terminal it prints the
indented, un-prefixed form.
"""

import sys

from .common import log_line


class CliLogger:
    def __init__(self, stream=None):
        self.stream = stream or sys.stdout
        try:
            self.interactive = self.stream.isatty()
        except (AttributeError, ValueError):
            self.interactive = False
        self.indent = 0

    def _emit(self, level: str, filename: str, lineno: int, msg: str):
        if self.interactive:
            self.stream.write("  " * self.indent + msg + "\n")
        else:
            self.stream.write(log_line(level, filename, lineno, msg))
        self.stream.flush()

    def info(self, msg, filename="cli.py", lineno=0):
        self._emit("INFO", filename, lineno, msg)

    def success(self, msg, filename="cli.py", lineno=0):
        self._emit("SUCC", filename, lineno, msg)

    def warning(self, msg, filename="cli.py", lineno=0):
        self._emit("WARN", filename, lineno, msg)

    def error(self, msg, filename="cli.py", lineno=0):
        self._emit("ERR", filename, lineno, msg)

    def newline(self):
        if self.interactive:
            self.stream.write("\n")
            self.stream.flush()

    def raw(self, text: str):
        self.stream.write(text)
        self.stream.flush()

    def group_start(self, title, filename="cli.py", lineno=0):
        self.info(title, filename, lineno)
        self.indent += 1

    def group_end(self):
        self.indent = max(0, self.indent - 1)

    def big_success(self, msg, filename="cli.py", lineno=65):
        self.newline()
        self.success("-" * len(msg), filename, lineno)
        self.success(msg, filename, lineno + 1)
        self.success("-" * len(msg), filename, lineno + 2)
        self.newline()

    def big_error(self, msg, filename="cli.py", lineno=74):
        self.newline()
        self.error("-" * len(msg), filename, lineno)
        self.error(msg, filename, lineno + 1)
        self.error("-" * len(msg), filename, lineno + 2)
        self.newline()
