"""Training metrics for StarForge: `log(step, loss=0.31, accuracy=0.9)` appends one JSON line to
$FORGE_JOB_DIR/metrics.jsonl, which the server serves (GET /api/v1/jobs/{id}/metrics) and the
web console draws as curves while the job runs.

The runner ships inside every capsule as .starforge/runner.pyz, an importable zip, so a job
uses it without installing anything:

    import os, sys
    sys.path.insert(0, os.path.join(os.environ.get("FORGE_CODE_DIR", "."), ".starforge", "runner.pyz"))
    from starforge_runner import metrics
    metrics.log(step, loss=loss)

Without FORGE_JOB_DIR (a run by hand) the lines go to ./metrics.jsonl, or the path given to
`Writer`. Values that are not finite numbers are left out (JSON has no NaN); booleans too.
Standard library only; Python >= 3.8.
"""

import json
import math
import numbers
import os
import threading
import time

FILE_NAME = "metrics.jsonl"


def default_path():
    """$FORGE_JOB_DIR/metrics.jsonl, else ./metrics.jsonl."""
    return os.path.join(os.environ.get("FORGE_JOB_DIR") or ".", FILE_NAME)


def _line(step, scalars, now):
    record = {}
    if step is not None:
        if isinstance(step, bool) or not isinstance(step, numbers.Integral):
            raise TypeError("step must be an int, got %r" % (step,))
        record["step"] = int(step)
    for name, value in scalars.items():
        if not isinstance(name, str) or not name or name in ("step", "time"):
            raise ValueError("a metric needs a name other than 'step' and 'time', got %r" % (name,))
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            # numpy / torch scalars: .item() gives a Python number.
            item = getattr(value, "item", None)
            value = item() if callable(item) else value
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError("metric %r must be a number, got %r" % (name, value))
        value = float(value)
        if math.isfinite(value):
            record[name] = value
    record["time"] = round(now, 3)
    return json.dumps(record, separators=(",", ":")) + "\n"


class Writer:
    """Appends metric lines to one file; each line is written whole with one write() on a file
    opened for appending, so a reader never sees half a line from this writer."""

    def __init__(self, path=None):
        self.path = path or default_path()
        self._lock = threading.Lock()
        self._fd = None

    def log(self, step=None, **scalars):
        """Writes {"step": step, name: value, …, "time": unix seconds} as one line."""
        data = _line(step, scalars, time.time()).encode("utf-8")
        with self._lock:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                                   0o644)
            os.write(self._fd, data)

    def close(self):
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_default = None
_default_lock = threading.Lock()


def log(step=None, **scalars):
    """metrics.log(10, loss=0.31, accuracy=0.9): one line in $FORGE_JOB_DIR/metrics.jsonl."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Writer()
        writer = _default
    writer.log(step, **scalars)
