"""status.json: running with heartbeats, then finished; always replaced atomically."""

import os
import re
import time
import unittest

import support

RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")

WAIT = r"""
import os, time
with open(os.environ["PIDFILE"] + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(os.environ["PIDFILE"] + ".tmp", os.environ["PIDFILE"])
while not os.path.exists(os.environ["GO"]):
    time.sleep(0.02)
"""


class StatusTest(support.RunnerTest):
    def test_running_heartbeat_then_finished(self):
        go = os.path.join(self.tmp, "go")
        pidfile = os.path.join(self.tmp, "pid")
        self.make(support.py(WAIT), env={"GO": go, "PIDFILE": pidfile})
        proc, stdout, stderr = self.start_runner(FORGE_CAPSULE_SHA256="cd" * 32)
        self.wait_for(lambda: os.path.exists(pidfile), 10, "the job to start")
        with open(pidfile) as f:
            child_pid = int(f.read())
        path = os.path.join(self.job_dir, "status.json")
        self.wait_for(lambda: os.path.exists(path), 5, "status.json")

        status = self.status()
        self.assertEqual(status["state"], "running")
        self.assertEqual(status["jobId"], support.JOB_ID)
        self.assertEqual(status["pid"], child_pid)
        self.assertEqual(status["runnerPid"], proc.pid)
        self.assertEqual(status["capsuleSha256"], "cd" * 32)
        self.assertRegex(status["startedAt"], RFC3339)
        self.assertRegex(status["heartbeatAt"], RFC3339)
        for key in ("finishedAt", "exitCode", "signal", "usage"):
            self.assertNotIn(key, status)

        # Heartbeats (every 0.2 s here) replace the file: a new inode each time, and the time
        # stamp moves on (it has whole seconds).
        inodes = set()
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            inodes.add(os.stat(path).st_ino)
            status = self.status()
            self.assertEqual(status["state"], "running")
            if len(inodes) >= 3 and status["heartbeatAt"] > status["startedAt"]:
                break
            time.sleep(0.05)
        self.assertGreaterEqual(len(inodes), 3, "status.json was not rewritten by heartbeats")
        self.assertGreater(status["heartbeatAt"], status["startedAt"])
        started = status["startedAt"]

        open(go, "w").close()
        self.assertEqual(proc.wait(timeout=10), 0)
        status = self.status()
        self.assertEqual(status["state"], "succeeded")
        self.assertEqual(status["exitCode"], 0)
        self.assertEqual(status["pid"], child_pid)
        self.assertEqual(status["startedAt"], started)
        self.assertRegex(status["finishedAt"], RFC3339)
        self.assertGreaterEqual(status["finishedAt"], started)
        # Nothing but the status file and the logs is left in the job directory.
        self.assertEqual(sorted(os.listdir(self.job_dir)), ["logs", "status.json"])

    def test_finished_status_records_the_cpu_and_memory_the_job_used(self):
        # A child that spins for 0.6 s of CPU and holds 64 MiB: both show in `usage`, which a
        # running status does not have.
        child = ("import time\nb = bytearray(64 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
                 "t = time.process_time()\nwhile time.process_time() - t < 0.6: pass\n")
        busy = "import subprocess, sys\nsubprocess.run([sys.executable, '-c', %r], check=True)\n" % child
        self.make(support.py(busy))
        proc, stdout, stderr = self.start_runner()
        self.assertEqual(proc.wait(timeout=30), 0)
        status = self.status()
        self.assertEqual(status["state"], "succeeded")
        usage = status["usage"]
        self.assertEqual(sorted(usage), ["cpuSeconds", "maxRssBytes"])
        self.assertGreaterEqual(usage["cpuSeconds"], 0.6)
        self.assertLess(usage["cpuSeconds"], 30)
        self.assertGreaterEqual(usage["maxRssBytes"], 64 << 20)
        self.assertLess(usage["maxRssBytes"], 4 << 30)

    def test_status_is_valid_json_at_every_moment(self):
        # Read continuously while heartbeats rewrite it: never a partial document.
        go = os.path.join(self.tmp, "go")
        pidfile = os.path.join(self.tmp, "pid")
        self.make(support.py(WAIT), env={"GO": go, "PIDFILE": pidfile})
        proc, stdout, stderr = self.start_runner(FORGE_RUNNER_HEARTBEAT_S="0.01")
        self.wait_for(lambda: os.path.exists(os.path.join(self.job_dir, "status.json")), 10,
                      "status.json")
        deadline = time.monotonic() + 0.5
        reads = 0
        while time.monotonic() < deadline:
            self.assertIn(self.status()["state"], ("running", "succeeded"))
            reads += 1
        open(go, "w").close()
        self.assertEqual(proc.wait(timeout=10), 0)
        self.assertGreater(reads, 10)


if __name__ == "__main__":
    unittest.main()
