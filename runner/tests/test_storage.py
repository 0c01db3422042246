"""No usable storage root: one warning, the job still runs, its exit code is preserved."""

import os
import unittest

import support

JOB = r"""
import os, sys
print("job ran; FORGE_JOB_DIR=%s" % os.environ.get("FORGE_JOB_DIR"))
sys.stdout.flush()
sys.exit(3)
"""


class StorageTest(support.RunnerTest):
    def check_runs_without_job_dir(self, needle, **env):
        self.make(support.py(JOB))
        code, out, err = self.run_runner(**env)
        self.assertEqual(code, 3, err)
        self.assertEqual(out, b"job ran; FORGE_JOB_DIR=None\n")
        warnings = [line for line in err.splitlines() if "warning" in line]
        self.assertEqual(len(warnings), 1, err)
        self.assertIn(needle, warnings[0])
        self.assertEqual(err.strip(), warnings[0])  # and nothing else

    def test_storage_root_unset(self):
        self.check_runs_without_job_dir("FORGE_STORAGE_ROOT is not set", FORGE_STORAGE_ROOT=None)

    def test_storage_root_unusable(self):
        blocker = os.path.join(self.tmp, "a-file")
        with open(blocker, "w") as f:
            f.write("not a directory")
        # Under a regular file nothing can be created, even by root.
        root = os.path.join(blocker, "storage")
        self.check_runs_without_job_dir(os.path.join(root, "jobs", support.JOB_ID),
                                        FORGE_STORAGE_ROOT=root)

    @unittest.skipIf(os.geteuid() == 0, "root ignores directory permissions")
    def test_storage_root_read_only(self):
        os.chmod(self.storage, 0o555)
        try:
            self.check_runs_without_job_dir("is not usable")
        finally:
            os.chmod(self.storage, 0o755)

    def test_tampering_is_still_refused_without_storage(self):
        self.make(support.py(JOB), files={"train.py": "x = 1\n"})
        os.remove(os.path.join(self.capsule, "train.py"))
        code, out, err = self.run_runner(FORGE_STORAGE_ROOT=None)
        self.assertEqual(code, 65)
        self.assertIn("train.py: missing", err)
        self.assertEqual(out, b"")


if __name__ == "__main__":
    unittest.main()
