"""KubeRay's K8sJobMode submitter script (upstream-facts §3.1, job.go BuildJobSubmitCommand) run verbatim
with `/bin/bash -ce --` and the emulator's bin/ on PATH."""

import json
import os
import subprocess
import time
import unittest

from raytest import BIN, Head, TmpTestCase, ZipServer, base_env, http, make_zip


def go_quote(s: str) -> str:
    """strconv.Quote for the ASCII JSON KubeRay passes."""
    return json.dumps(s)


def build_job_submit_command(dashboard_url, job_id, entrypoint, runtime_env_json="", metadata=None,
                             num_cpus=0.0, num_gpus=0.0, resources=""):
    """A transcription of ray-operator/controllers/ray/common/job.go BuildJobSubmitCommand (K8sJobMode)."""
    address = dashboard_url if dashboard_url.startswith("http://") else "http://" + dashboard_url
    health = ('python -c "import urllib.request; r=urllib.request.urlopen(\'%s\', timeout=%d); '
              'exit(0 if b\'success\' in r.read() else 1)"' % (address + "/api/gcs_healthz", 10))
    cmd = ["until", health, ">/dev/null", "2>&1", ";",
           "do", "echo", go_quote("Waiting for Ray Dashboard GCS to become healthy at " + address + " ..."), ";",
           "sleep", "2", ";", "done", ";"]
    cmd += ["if", "!", "ray", "job", "status", "--address", address, job_id, ">/dev/null", "2>&1", ";", "then"]
    cmd += ["ray", "job", "submit", "--address", address, "--no-wait"]
    if runtime_env_json:
        cmd += ["--runtime-env-json", go_quote(runtime_env_json)]
    if metadata:
        cmd += ["--metadata-json", go_quote(json.dumps(metadata, separators=(",", ":")))]
    cmd += ["--submission-id", job_id]
    if num_cpus > 0:
        cmd += ["--entrypoint-num-cpus", "%f" % num_cpus]
    if num_gpus > 0:
        cmd += ["--entrypoint-num-gpus", "%f" % num_gpus]
    if resources:
        cmd += ["--entrypoint-resources", go_quote(resources)]
    cmd += ["--", entrypoint.strip(), ";", "fi", ";"]
    cmd += ["ray", "job", "logs", "--address", address, "--follow", job_id]
    return " ".join(cmd)


class SubmitterScriptTest(TmpTestCase):
    def run_submitter(self, head, tmp, script, job_id, timeout=60):
        env = base_env(tmp, PYTHONUNBUFFERED="1", RAY_DASHBOARD_ADDRESS=head.url[len("http://"):],
                       RAY_JOB_SUBMISSION_ID=job_id)
        env["PATH"] = BIN + ":/usr/local/bin:/usr/bin:/bin"
        return subprocess.run(["/bin/bash", "-ce", "--", script], env=env, capture_output=True, text=True,
                              timeout=timeout)

    def test_the_script_runs_the_job_and_streams_its_driver_log(self):
        tmp = self.mkdtemp()
        files = os.path.join(tmp, "files")
        os.makedirs(files)
        make_zip(os.path.join(files, "capsule.zip"), {
            "capsule/": None,
            "capsule/runner.py": "import os\nprint('runner in', os.path.basename(os.getcwd()))\n"
                                 "print(os.environ['counter_name'])\n",
        })
        zips = ZipServer(files)
        self.addCleanup(zips.close)
        head = Head(tmp).start()
        self.addCleanup(head.stop)
        job_id = "rayjob-sample-b9qzt"
        runtime_env = json.dumps({"env_vars": {"counter_name": "test_counter"},
                                  "pip": ["requests==2.26.0", "pendulum==2.1.2"],
                                  "working_dir": zips.url("capsule.zip") + "?X-Amz-Signature=abc"},
                                 separators=(",", ":"))
        script = build_job_submit_command(head.url[len("http://"):], job_id, "python runner.py",
                                          runtime_env_json=runtime_env, metadata={"owner": "starforge"},
                                          num_cpus=1.0)
        r = self.run_submitter(head, tmp, script, job_id)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("Job '%s' submitted successfully" % job_id, r.stdout)
        self.assertIn("Running entrypoint for job %s: python runner.py\nrunner in http_127_0_0_1_%d_capsule\n"
                      "test_counter\n" % (job_id, zips.port), r.stdout)
        self.assertIn("SUCC cli.py:66 -- Job '%s' succeeded" % job_id, r.stdout)
        info = head.info(job_id)
        self.assertEqual(info["status"], "SUCCEEDED")
        self.assertEqual(info["metadata"], {"owner": "starforge"})
        self.assertEqual(info["runtime_env"]["pip"], {"packages": ["requests==2.26.0", "pendulum==2.1.2"],
                                                      "pip_check": False})
        # The submitter pod's log is the driver log (plus the CLI's lines).
        self.assertIn(head.logs(job_id), r.stdout)

        # A retried submitter pod: the status guard skips the submit and follows the logs again.
        r2 = self.run_submitter(head, tmp, script, job_id)
        self.assertEqual(r2.returncode, 0, r2.stderr)
        self.assertNotIn("submitted successfully", r2.stdout)
        self.assertIn(head.logs(job_id), r2.stdout)
        jobs = json.loads(http("GET", head.url + "/api/jobs/")[1])
        self.assertEqual([j["submission_id"] for j in jobs], [job_id])

    def test_a_failed_job_still_exits_0_because_logs_follow_does(self):
        tmp = self.mkdtemp()
        head = Head(tmp).start()
        self.addCleanup(head.stop)
        job_id = "rayjob-fail-x7k2p"
        script = build_job_submit_command(head.url, job_id, "python3 -c 'import ray'")
        r = self.run_submitter(head, tmp, script, job_id)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("ModuleNotFoundError: No module named 'ray'", r.stdout)
        self.assertIn("ERR cli.py:75 -- Job '%s' failed" % job_id, r.stdout)
        self.assertEqual(head.info(job_id)["status"], "FAILED")

    def test_print_42_entrypoint(self):
        tmp = self.mkdtemp()
        head = Head(tmp).start()
        self.addCleanup(head.stop)
        job_id = "rayjob-42"
        r = self.run_submitter(head, tmp, build_job_submit_command(head.url, job_id, "python3 -c 'print(42)'"),
                               job_id)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Running entrypoint for job %s: python3 -c 'print(42)'\n42\n" % job_id, r.stdout)
        self.assertEqual(head.info(job_id)["status"], "SUCCEEDED")

    def test_the_script_waits_for_the_dashboard(self):
        tmp = self.mkdtemp()
        head = Head(tmp)
        job_id = "rayjob-late"
        script = build_job_submit_command(head.url, job_id, "echo late start")
        env = base_env(tmp)
        env["PATH"] = BIN + ":/usr/local/bin:/usr/bin:/bin"
        proc = subprocess.Popen(["/bin/bash", "-ce", "--", script], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(2.5)
        head.start()
        self.addCleanup(head.stop)
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0, err)
        self.assertIn("Waiting for Ray Dashboard GCS to become healthy at %s ..." % head.url, out)
        self.assertIn("late start\n", out)


if __name__ == "__main__":
    unittest.main()
