"""The job directory under the storage root: logs/driver.log and status.json.

Nothing here ever stops the job: when the storage root is unset or unusable the runner warns
once and the job's output goes to stdout only.
"""

import json
import os

from starforge_runner import util


def job_dir_path(storage_root, job_id):
    return os.path.join(storage_root, "jobs", job_id)


class JobDir(object):
    def __init__(self, storage_root, job_id):
        self.storage_root = storage_root
        self.job_id = job_id
        self.path = None  # set once the directory is usable
        self._log_fd = None
        self._log_warned = False
        self._status_warned = False

    @property
    def usable(self):
        return self.path is not None

    @property
    def logging(self):
        """driver.log is open and takes the output."""
        return self._log_fd is not None

    def open(self):
        """Creates <root>/jobs/<id>/logs and opens driver.log for appending. Returns a warning
        (one line) when the job directory cannot be used, else None."""
        if not self.storage_root:
            return ("warning: FORGE_STORAGE_ROOT is not set; the job runs without a job "
                    "directory (no logs/driver.log, no status.json; output goes to stdout only)")
        path = os.path.abspath(job_dir_path(self.storage_root, self.job_id))
        try:
            os.makedirs(os.path.join(path, "logs"), exist_ok=True)
            self._log_fd = os.open(os.path.join(path, "logs", "driver.log"),
                                   os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
            # Prove that status.json can be written too (the directory may differ from logs/).
            self._probe(path)
        except OSError as err:
            if self._log_fd is not None:
                os.close(self._log_fd)
                self._log_fd = None
            return ("warning: the job directory %s is not usable (%s); the job runs anyway "
                    "without logs/driver.log or status.json (output goes to stdout only)"
                    % (path, util.describe_os_error(err)))
        self.path = path
        return None

    @staticmethod
    def _tmp_path(directory):
        return os.path.join(directory, ".status.json.%d.tmp" % os.getpid())

    def _probe(self, directory):
        """Proves that status.json's temporary file can be created in directory."""
        tmp = self._tmp_path(directory)
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644))
        os.unlink(tmp)

    def _write_file(self, final, data):
        tmp = self._tmp_path(os.path.dirname(final))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            util.write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)

    def write_status(self, doc):
        """Atomically replaces status.json (temporary file + rename). Returns a warning the
        first time writing fails, else None; later attempts keep trying."""
        if self.path is None:
            return None
        data = (json.dumps(doc, indent=2) + "\n").encode("utf-8")
        try:
            self._write_file(os.path.join(self.path, "status.json"), data)
        except OSError as err:
            if not self._status_warned:
                self._status_warned = True
                return "warning: cannot write %s/status.json: %s" % (
                    self.path, util.describe_os_error(err))
        return None

    def append_log(self, data):
        """Appends bytes to driver.log. Returns a warning the first time writing fails, after
        which driver.log is abandoned; else None."""
        if self._log_fd is None:
            return None
        try:
            util.write_all(self._log_fd, data)
        except OSError as err:
            os.close(self._log_fd)
            self._log_fd = None
            if not self._log_warned:
                self._log_warned = True
                return ("warning: cannot write %s/logs/driver.log (%s); output goes to stdout "
                        "only" % (self.path, util.describe_os_error(err)))
        return None

    def close(self):
        if self._log_fd is not None:
            os.close(self._log_fd)
            self._log_fd = None
