"""The log tee: driver.log holds exactly what the runner's stdout got, as it arrives."""

import os
import subprocess
import unittest

import support

MIXED = r"""
import os, sys
sys.stdout.write("out line 1\n")
sys.stderr.write("err line 1\n")
sys.stdout.buffer.write(b"\x00\xff binary \xc3\xa9\n")
for i in range(2000):
    sys.stdout.write("bulk %d %s\n" % (i, "x" * 50))
sys.stderr.write("no trailing newline")
"""

# Prints a line (relying on the runner's PYTHONUNBUFFERED=1), then a partial line (flushed),
# then waits for the test to create GO.
LIVE = r"""
import os, sys, time
print("first line")
sys.stdout.write("partial")
sys.stdout.flush()
while not os.path.exists(os.environ["GO"]):
    time.sleep(0.02)
print(" end")
"""


class LogTeeTest(support.RunnerTest):
    def test_driver_log_equals_stdout(self):
        self.make(support.py(MIXED))
        code, out, err = self.run_runner()
        self.assertEqual(code, 0, err)
        self.assertEqual(err, "")  # the runner says nothing on a clean run
        self.assertIn(b"out line 1\n", out)
        self.assertIn(b"err line 1\n", out)  # stderr is merged into the same stream
        self.assertIn(b"\x00\xff binary \xc3\xa9\n", out)
        self.assertTrue(out.endswith(b"no trailing newline"))
        self.assertEqual(out.count(b"bulk "), 2000)
        self.assertEqual(self.driver_log(), out)

    def test_lines_arrive_while_the_job_runs(self):
        go = os.path.join(self.tmp, "go")
        self.make(support.py(LIVE), env={"GO": go})
        proc, stdout, stderr = self.start_runner()
        self.wait_for(lambda: self.driver_log() == b"first line\npartial", 10,
                      "the first line and the partial line in driver.log")
        self.wait_for(lambda: stdout.data() == b"first line\npartial", 10,
                      "the same on the runner's stdout")
        self.assertIsNone(proc.poll())
        open(go, "w").close()
        self.assertEqual(proc.wait(timeout=10), 0)
        stdout.join(5)
        self.assertEqual(stdout.data(), b"first line\npartial end\n")
        self.assertEqual(self.driver_log(), stdout.data())

    def test_driver_log_is_appended_not_truncated(self):
        self.make(support.py("print('second run')"))
        os.makedirs(os.path.join(self.job_dir, "logs"))
        with open(os.path.join(self.job_dir, "logs", "driver.log"), "wb") as f:
            f.write(b"first run\n")
        self.assertEqual(self.run_runner()[0], 0)
        self.assertEqual(self.driver_log(), b"first run\nsecond run\n")

    def test_closed_stdout_does_not_stop_the_job(self):
        # Whoever reads the runner's stdout goes away: the job goes on, driver.log gets it all.
        self.make(support.py("import sys, time\nfor i in range(20):\n    print(i)\n"
                             "    time.sleep(0.01)\nsys.exit(4)"))
        read_end, write_end = os.pipe()
        os.close(read_end)
        proc = subprocess.Popen(self.command(), cwd=self.capsule, env=self.runner_env(),
                                stdout=write_end, stderr=subprocess.PIPE)
        os.close(write_end)
        self.procs.append(proc)
        _, err = proc.communicate(timeout=10)
        self.assertEqual(proc.returncode, 4, err)
        log = self.driver_log().decode()
        self.assertIn("cannot write to stdout", log)
        self.assertEqual([line for line in log.splitlines() if "starforge-runner" not in line],
                         [str(i) for i in range(20)])

    def test_fallback_mode_stores_the_output_once(self):
        # The local fleet keeps the runner's stdout as runner.log: the job's output is in
        # driver.log only, not twice.
        self.make(support.py(MIXED))
        code, out, err = self.run_runner(FORGE_RUNNER_STDOUT="fallback")
        self.assertEqual(code, 0, err)
        self.assertEqual(out, b"")
        log = self.driver_log()
        self.assertEqual(log.count(b"bulk "), 2000)
        self.assertIn(b"err line 1\n", log)

    def test_fallback_mode_writes_stdout_without_a_job_directory(self):
        self.make(support.py(MIXED))
        code, out, err = self.run_runner(FORGE_RUNNER_STDOUT="fallback", FORGE_STORAGE_ROOT=None)
        self.assertEqual(code, 0, err)
        self.assertEqual(out.count(b"bulk "), 2000)
        self.assertIn("FORGE_STORAGE_ROOT is not set", err)


if __name__ == "__main__":
    unittest.main()
