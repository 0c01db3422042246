"""The Jobs API and `ray job ...` against a real `ray start --head --block` process."""

import json
import os
import re
import shutil
import tempfile
import time
import unittest
import urllib.request

from raytest import Head, ZipServer, free_port, http, make_zip, wait_until
from kubesim_ray import websocket as ws
from kubesim_ray.jobs import alive, group_alive

def read(path):
    with open(path) as f:
        return f.read()


HEADER_RE = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\tINFO job_manager\.py:\d+ -- Runtime env is setting up\.\n"


class JobsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kubesim-ray-jobs-")
        cls.head = Head(cls.tmp, RAY_JOB_STOP_WAIT_TIME_S=1).start()
        cls.files = os.path.join(cls.tmp, "files")
        os.makedirs(cls.files)
        cls.zips = ZipServer(cls.files)

    @classmethod
    def tearDownClass(cls):
        cls.head.stop()
        cls.zips.close()
        shutil.rmtree(cls.tmp, True)

    def sid(self, name):
        return "%s-%d" % (name, time.time_ns() % 10**9)

    def assert_driver_log(self, sid, entrypoint, output):
        log = self.head.logs(sid)
        self.assertRegex(log, "^" + HEADER_RE)
        body = re.sub("^" + HEADER_RE, "", log)
        self.assertEqual(body, "Running entrypoint for job %s: %s\n%s" % (sid, entrypoint, output))

    # ------------------------------------------------------------- plain runs
    def test_http_submit_succeeds_with_ray_fields(self):
        sid = self.head.submit(entrypoint="python3 -c 'print(42)'")
        self.assertRegex(sid, r"^raysubmit_[A-Za-z1-9]{16}$")
        info = self.head.wait_status(sid)
        self.assertEqual(info["status"], "SUCCEEDED")
        self.assertEqual(info["message"], "Job finished successfully.")
        self.assertEqual(info["type"], "SUBMISSION")
        self.assertEqual(info["submission_id"], sid)
        self.assertIsNone(info["job_id"])
        self.assertIsNone(info["driver_info"])
        self.assertIsNone(info["error_type"])
        self.assertEqual(info["driver_exit_code"], 0)
        self.assertEqual(info["driver_agent_http_address"], "http://127.0.0.1:%d" % self.head.agent_port)
        self.assertRegex(info["driver_node_id"], "^[0-9a-f]{56}$")
        self.assertLessEqual(info["start_time"], info["end_time"])
        self.assertIsNone(info["metadata"])
        self.assert_driver_log(sid, "python3 -c 'print(42)'", "42\n")
        # The driver log file sits in the head's session dir under Ray's name.
        path = os.path.join(self.tmp, "ray", "session_latest", "logs", "job-driver-%s.log" % sid)
        with open(path) as f:
            self.assertEqual(f.read(), self.head.logs(sid))

    def test_version_list_health_and_404s(self):
        status, text = http("GET", self.head.url + "/api/version")
        v = json.loads(text)
        self.assertEqual((v["version"], v["ray_version"]), ("4", "2.60.0"))
        self.assertTrue(v["session_name"].startswith("session_"))
        self.assertEqual(http("GET", self.head.url + "/api/gcs_healthz"), (200, "success"))
        self.assertEqual(http("GET", self.head.url + "/api/jobs/nope"), (404, "Job nope does not exist"))
        self.assertEqual(http("GET", self.head.url + "/api/jobs/nope/logs")[0], 404)
        self.assertEqual(http("POST", self.head.url + "/api/jobs/nope/stop")[0], 404)
        self.assertEqual(http("POST", self.head.url + "/api/jobs", {"entrypoint": "true"})[0], 404)
        status, text = http("POST", self.head.url + "/api/jobs/", {"key": "baaaad request"})
        self.assertEqual(status, 400)
        self.assertIn("TypeError: JobSubmitRequest.__init__() got an unexpected keyword argument 'key'", text)
        sid = self.head.submit(entrypoint="true", metadata={"owner": "t"})
        jobs = json.loads(http("GET", self.head.url + "/api/jobs/")[1])
        self.assertIn(sid, [j["submission_id"] for j in jobs])
        self.assertEqual(self.head.info(sid)["metadata"], {"owner": "t"})
        self.assertEqual(http("GET", "http://127.0.0.1:%d/api/local_raylet_healthz" % self.head.agent_port),
                         (200, "success"))

    def test_keep_alive_connections_stay_in_sync(self):
        # Go's http.Client (KubeRay's dashboard client) reuses connections.
        import http.client

        c = http.client.HTTPConnection("127.0.0.1", self.head.dash_port, timeout=10)
        self.addCleanup(c.close)
        c.request("POST", "/api/jobs", body=b'{"entrypoint": "true"}', headers={"Content-Type": "application/json"})
        r = c.getresponse()
        self.assertEqual((r.status, r.read()), (404, b"404: Not Found"))
        c.request("POST", "/api/jobs/", body=b'{"entrypoint": "true"}', headers={"Content-Type": "application/json"})
        r = c.getresponse()
        sid = json.loads(r.read())["submission_id"]
        c.request("GET", "/api/jobs/" + sid)
        r = c.getresponse()
        self.assertEqual(json.loads(r.read())["submission_id"], sid)

    def test_exit_3_fails_with_rays_message(self):
        sid = self.sid("exit3")
        ep = "echo out; echo err >&2; exit 3"
        self.head.submit(entrypoint=ep, submission_id=sid)
        info = self.head.wait_status(sid)
        self.assertEqual(info["status"], "FAILED")
        self.assertEqual(info["error_type"], "JOB_ENTRYPOINT_COMMAND_ERROR")
        self.assertEqual(info["driver_exit_code"], 3)
        log = self.head.logs(sid)
        self.assertEqual(info["message"], "Job entrypoint command failed with exit code 3, last available logs "
                                          "(truncated to 20,000 chars):\n" + log)
        self.assert_driver_log(sid, ep, "out\nerr\n")

    def test_failure_message_keeps_the_last_ten_lines(self):
        sid = self.head.submit(entrypoint="for i in $(seq 1 30); do echo line$i; done; exit 1")
        msg = self.head.wait_status(sid)["message"]
        tail = msg.split("\n", 1)[1]
        self.assertEqual(tail, "".join("line%d\n" % i for i in range(21, 31)))

    def test_import_ray_is_not_faked(self):
        sid = self.head.submit(entrypoint="python3 -c 'import ray'")
        info = self.head.wait_status(sid)
        self.assertEqual(info["status"], "FAILED")
        self.assertEqual(info["driver_exit_code"], 1)
        self.assertIn("ModuleNotFoundError: No module named 'ray'", self.head.logs(sid))
        self.assertIn("ModuleNotFoundError: No module named 'ray'", info["message"])

    def test_driver_env_and_shell(self):
        sid = self.head.submit(
            entrypoint='echo "$FOO|$BAR|$PYTHONUNBUFFERED|$RAY_ADDRESS"; cd "$OLDPWD" 2>/dev/null; true',
            runtime_env={"env_vars": {"FOO": "foo value", "BAR": "${PATH_PREFIX_UNSET}x"}})
        self.head.wait_status(sid)
        out = self.head.logs(sid).splitlines()[-1]
        self.assertEqual(out, "foo value|${PATH_PREFIX_UNSET}x|1|127.0.0.1:%d" % self.head.gcs_port)
        cfg = self.head.info(sid)
        self.assertEqual(cfg["runtime_env"], {"env_vars": {"FOO": "foo value", "BAR": "${PATH_PREFIX_UNSET}x"}})

    # ------------------------------------------------------------- working_dir
    def _wd_job(self, uri, extra_env=None):
        env = {"env_vars": {"MARK": "m1"}}
        env.update(extra_env or {})
        env["working_dir"] = uri
        ep = "python3 -c 'import os,sys; print(sorted(os.listdir(\".\"))); print(os.environ[\"MARK\"]); " \
             "print(os.environ[\"PYTHONPATH\"].split(\":\")[0] == os.getcwd())'"
        sid = self.head.submit(entrypoint=ep, runtime_env=env)
        return sid, self.head.wait_status(sid)

    def test_http_zip_with_one_top_level_dir_is_stripped(self):
        make_zip(os.path.join(self.files, "one.zip"), {"capsule/": None, "capsule/run.py": "print(1)",
                                                        "capsule/data/x.txt": "x"})
        sid, info = self._wd_job(self.zips.url("one.zip"))
        self.assertEqual(info["status"], "SUCCEEDED", info)
        self.assertEqual(self.head.logs(sid).splitlines()[-3:], ["['data', 'run.py']", "m1", "True"])
        wd = os.path.join(self.tmp, "ray", "session_latest", "runtime_resources", "working_dir_files",
                          "http_127_0_0_1_%d_one" % self.zips.port)
        self.assertTrue(os.path.isfile(os.path.join(wd, "run.py")))
        self.assertIn(("/one.zip", "ray-runtime-env-curl/1.0"), self.zips.paths)

    def test_zip_with_two_entries_is_not_stripped(self):
        make_zip(os.path.join(self.files, "two.zip"), {"capsule/run.py": "x", "manifest.json": "{}"})
        sid, info = self._wd_job(self.zips.url("two.zip"))
        self.assertEqual(info["status"], "SUCCEEDED", info)
        self.assertEqual(self.head.logs(sid).splitlines()[-3], "['capsule', 'manifest.json']")

    def test_file_uri(self):
        path = make_zip(os.path.join(self.files, "sha256-abc.zip"), {"pkg/": None, "pkg/main.py": "print('hi')"})
        sid, info = self._wd_job("file://" + path)
        self.assertEqual(info["status"], "SUCCEEDED", info)
        self.assertEqual(self.head.logs(sid).splitlines()[-3], "['main.py']")

    def test_cache_key_ignores_the_query_string(self):
        make_zip(os.path.join(self.files, "cached.zip"), {"c/run.py": "x"})
        before = len([p for p, _ in self.zips.paths if p.startswith("/cached.zip")])
        _, i1 = self._wd_job(self.zips.url("cached.zip?X-Amz-Signature=aaa"))
        _, i2 = self._wd_job(self.zips.url("cached.zip?X-Amz-Signature=bbb"))
        self.assertEqual((i1["status"], i2["status"]), ("SUCCEEDED", "SUCCEEDED"))
        fetched = [p for p, _ in self.zips.paths if p.startswith("/cached.zip")]
        self.assertEqual(fetched[before:], ["/cached.zip?X-Amz-Signature=aaa"])

    def test_404_working_dir_is_a_runtime_env_setup_failure(self):
        url = self.zips.url("missing.zip")
        sid, info = self._wd_job(url)
        self.assertEqual(info["status"], "FAILED")
        self.assertEqual(info["error_type"], "RUNTIME_ENV_SETUP_FAILURE")
        self.assertIsNone(info["driver_exit_code"])
        self.assertIsNone(info["driver_agent_http_address"])
        self.assertTrue(info["message"].startswith(
            "runtime_env setup failed: Failed to set up runtime environment.\n"
            "Could not create the actor because its associated runtime env failed to be created.\n"
            "Traceback (most recent call last):\n"), info["message"])
        self.assertIn("requests.exceptions.HTTPError: 404 Client Error: File not found for url: " + url,
                      info["message"])
        self.assertTrue(self.head.logs(sid).endswith(info["message"]))
        # Ray's agent tries three times.
        self.assertEqual(len([p for p, _ in self.zips.paths if p == "/missing.zip"]), 3)

    def test_connection_refused_and_bad_zip(self):
        port = free_port()
        _, info = self._wd_job("http://127.0.0.1:%d/x.zip" % port)
        self.assertEqual(info["error_type"], "RUNTIME_ENV_SETUP_FAILURE")
        self.assertIn("requests.exceptions.ConnectionError: HTTPConnectionPool(host='127.0.0.1', port=%d)" % port,
                      info["message"])
        with open(os.path.join(self.files, "notzip.zip"), "w") as f:
            f.write("not a zip")
        _, info = self._wd_job(self.zips.url("notzip.zip"))
        self.assertEqual(info["error_type"], "RUNTIME_ENV_SETUP_FAILURE")
        self.assertIn("zipfile.BadZipFile: File is not a zip file", info["message"])
        _, info = self._wd_job("file:///nonexistent/x.zip")
        self.assertIn("FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/x.zip'",
                      info["message"])

    def test_unsupported_working_dirs_via_http(self):
        for uri, text in [("/local/dir", "/local/dir is not a valid URI. Passing directories or modules to be "
                                         "dynamically uploaded is only supported at the job level"),
                          ("ftp://h/x.zip", "ftp://h/x.zip is not a valid URI."),
                          ("https://h/x.tar.gz", "Only .zip or .whl files supported for remote URIs.")]:
            sid = self.head.submit(entrypoint="true", runtime_env={"working_dir": uri})
            info = self.head.wait_status(sid)
            self.assertEqual((info["status"], info["error_type"]), ("FAILED", "JOB_SUPERVISOR_ACTOR_START_FAILURE"))
            self.assertTrue(info["message"].startswith("Failed to start supervisor actor %s: '" % sid), info)
            self.assertIn(text, info["message"])

    def test_s3_needs_libraries_that_are_not_there(self):
        _, info = self._wd_job("s3://bucket/x.zip")
        self.assertIn("ImportError: You must `pip install smart_open[s3]` to fetch URIs in s3 bucket.",
                      info["message"])

    # ------------------------------------------------------------- stop / delete / duplicates
    def test_stop_terminates_the_process_group(self):
        pids = os.path.join(self.tmp, "stop-pids")
        sid = self.head.submit(entrypoint="sleep 1000 & echo $! > %s; echo $$ >> %s; wait" % (pids, pids))
        self.head.wait_status(sid, ("RUNNING",))
        wait_until(lambda: os.path.exists(pids) and len(read(pids).split()) == 2)
        procs = [int(p) for p in read(pids).split()]
        self.assertTrue(all(alive(p) for p in procs))
        self.assertEqual(http("POST", self.head.url + "/api/jobs/%s/stop" % sid), (200, '{"stopped": true}'))
        info = self.head.wait_status(sid, timeout=60)
        self.assertEqual(info["status"], "STOPPED")
        self.assertEqual(info["message"], "Job was intentionally stopped.")
        self.assertIsNone(info["driver_exit_code"])
        self.assertFalse(any(alive(p) for p in procs))
        self.assertFalse(group_alive(procs[1]))
        self.assertEqual(http("POST", self.head.url + "/api/jobs/%s/stop" % sid), (200, '{"stopped": false}'))

    def test_stop_escalates_to_sigkill(self):
        sid = self.head.submit(entrypoint="trap '' TERM; echo ready; while true; do sleep 0.1; done")
        wait_until(lambda: "ready" in self.head.logs(sid))
        t0 = time.time()
        r = self.head.ray("job", "stop", "--address", self.head.url, sid)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Attempting to stop job '%s'" % sid, r.stdout)
        self.assertIn("WARN cli.py:83 -- Job '%s' was stopped" % sid, r.stdout)
        self.assertGreaterEqual(time.time() - t0, 0.9)  # RAY_JOB_STOP_WAIT_TIME_S=1 before SIGKILL
        self.assertEqual(self.head.info(sid)["status"], "STOPPED")

    def test_leftover_background_processes_are_killed_when_the_job_ends(self):
        pidf = os.path.join(self.tmp, "bg-pid")
        sid = self.head.submit(entrypoint="sleep 1000 & echo $! > %s; echo done" % pidf)
        self.assertEqual(self.head.wait_status(sid)["status"], "SUCCEEDED")
        pid = int(read(pidf))
        wait_until(lambda: not alive(pid), timeout=30, what="background sleep to die")

    def test_duplicate_submission_id(self):
        sid = self.sid("dup")
        self.head.submit(entrypoint="true", submission_id=sid)
        status, text = http("POST", self.head.url + "/api/jobs/", {"entrypoint": "true", "submission_id": sid})
        self.assertEqual(status, 500)
        self.assertIn("Request failed with status code 400", text)
        self.assertIn("ValueError: Job with submission_id %s already exists. Please use a different submission_id."
                      % sid, text)
        r = self.head.ray("job", "submit", "--address", self.head.url, "--submission-id", sid, "--no-wait",
                          "--", "true")
        self.assertEqual(r.returncode, 1)
        self.assertIn("RuntimeError: Request failed with status code 500:", r.stderr)
        self.assertIn("Please use a different submission_id", r.stderr)

    def test_delete(self):
        sid = self.head.submit(entrypoint="sleep 30")
        self.head.wait_status(sid, ("RUNNING",))
        status, text = http("DELETE", self.head.url + "/api/jobs/" + sid)
        self.assertEqual(status, 500)
        self.assertIn("Attempted to delete job '%s', but it is in a non-terminal state RUNNING." % sid, text)
        http("POST", self.head.url + "/api/jobs/%s/stop" % sid)
        self.head.wait_status(sid)
        self.assertEqual(http("DELETE", self.head.url + "/api/jobs/" + sid), (200, '{"deleted": true}'))
        self.assertEqual(http("GET", self.head.url + "/api/jobs/" + sid)[0], 404)

    # ------------------------------------------------------------- CLI
    def test_cli_submit_waits_and_prints_rays_lines(self):
        sid = self.sid("cli")
        r = self.head.ray("job", "submit", "--address", self.head.url, "--submission-id", sid,
                          "--runtime-env-json", json.dumps({"env_vars": {"X": "1"}}),
                          "--entrypoint-num-cpus", "1.000000", "--", "python3", "-c", "print(42)")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertRegex(lines[0], r"\tINFO cli\.py:\d+ -- Job submission server address: http://127\.0\.0\.1:\d+$")
        self.assertIn("SUCC cli.py:66 -- Job '%s' submitted successfully" % sid, r.stdout)
        self.assertIn("-- Tailing logs until the job exits (disable with --no-wait):", r.stdout)
        self.assertIn("Running entrypoint for job %s: python3 -c 'print(42)'\n42\n" % sid, r.stdout)
        self.assertIn("SUCC cli.py:66 -- Job '%s' succeeded" % sid, r.stdout)
        info = self.head.info(sid)
        self.assertEqual(info["entrypoint"], "python3 -c 'print(42)'")
        self.assertEqual(info["metadata"], {})
        self.assertEqual(info["runtime_env"], {"env_vars": {"X": "1"}})

    def test_cli_submit_of_a_failing_job_exits_1_and_logs_follow_exits_0(self):
        sid = self.sid("clifail")
        r = self.head.ray("job", "submit", "--address", self.head.url, "--submission-id", sid, "--",
                          "bash", "-c", "echo bye; exit 7")
        self.assertEqual(r.returncode, 1)
        self.assertIn("ERR cli.py:75 -- Job '%s' failed" % sid, r.stdout)
        self.assertIn("Status message: Job entrypoint command failed with exit code 7", r.stdout)
        r = self.head.ray("job", "logs", "--address", self.head.url, "--follow", sid)
        self.assertEqual(r.returncode, 0)
        self.assertIn("bye\n", r.stdout)
        r = self.head.ray("job", "logs", "--address", self.head.url, sid)
        self.assertTrue(r.stdout.endswith("\n" + self.head.logs(sid)), r.stdout)

    def test_cli_status_exit_codes(self):
        sid = self.head.submit(entrypoint="sleep 30")
        self.head.wait_status(sid, ("RUNNING",))
        r = self.head.ray("job", "status", "--address", self.head.url, sid)
        self.assertEqual(r.returncode, 0)
        self.assertIn("INFO cli.py:91 -- Status for job '%s': RUNNING" % sid, r.stdout)
        self.assertIn("Status message: Job is currently running.", r.stdout)
        r = self.head.ray("job", "status", "--address", self.head.url, "nope")
        self.assertEqual(r.returncode, 1)
        self.assertIn("RuntimeError: Request failed with status code 404: Job nope does not exist.", r.stderr)
        r = self.head.ray("job", "status", "--address", "http://127.0.0.1:%d" % free_port(), sid)
        self.assertEqual(r.returncode, 1)
        self.assertIn("ConnectionError: Failed to connect to Ray at address: http://127.0.0.1:", r.stderr)
        http("POST", self.head.url + "/api/jobs/%s/stop" % sid)

    def test_cli_address_resolution(self):
        sid = self.head.submit(entrypoint="true")
        self.head.wait_status(sid)
        # RAY_ADDRESS overrides --address; a GCS address is resolved to the dashboard through the GCS.
        r = self.head.ray("job", "status", "--address", "http://127.0.0.1:1", sid,
                          env={"RAY_ADDRESS": self.head.gcs})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Job submission server address: %s" % self.head.url, r.stdout)
        # No address at all: the local cluster (ray_current_cluster under RAY_TMPDIR).
        r = self.head.ray("job", "status", sid)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_cli_rejects_non_zip_remote_working_dir(self):
        r = self.head.ray("job", "submit", "--address", self.head.url, "--working-dir", "https://h/x.tar", "--",
                          "true")
        self.assertEqual(r.returncode, 1)
        self.assertIn("ValueError: Only .zip files supported for remote URIs.", r.stderr)

    def test_cli_uploads_a_local_working_dir(self):
        src = os.path.join(self.tmp, "localwd")
        os.makedirs(os.path.join(src, "pkg"))
        with open(os.path.join(src, "pkg", "mod.py"), "w") as f:
            f.write("VALUE = 'from-upload'\n")
        r = self.head.ray("job", "submit", "--address", self.head.url, "--working-dir", src, "--",
                          "python3", "-c", "import pkg.mod; print(pkg.mod.VALUE)")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("from-upload\n", r.stdout)
        self.assertRegex(r.stderr, r"Uploading package gcs://_ray_pkg_[0-9a-f]{16}\.zip\.")

    # ------------------------------------------------------------- streaming
    def test_tail_websocket_and_chunked(self):
        sid = self.head.submit(entrypoint="for i in 1 2 3; do echo tick$i; sleep 0.3; done")
        sock = ws.ClientSocket.connect(self.head.url + "/api/jobs/%s/logs/tail" % sid)
        text = "".join(sock)
        self.assertEqual(sock.close_code, 1000)
        self.assertTrue(text.endswith("tick1\ntick2\ntick3\n"), text)
        self.assertEqual(text, self.head.logs(sid))
        with urllib.request.urlopen(self.head.url + "/api/jobs/%s/logs/tail" % sid, timeout=10) as r:
            self.assertEqual(r.read().decode(), text)
        with self.assertRaises(ws.HandshakeError):
            ws.ClientSocket.connect(self.head.url + "/api/jobs/nope/logs/tail")

    def test_tail_of_a_job_that_never_started_closes_at_once(self):
        sid, _ = self._wd_job("file:///nonexistent/y.zip")
        sock = ws.ClientSocket.connect(self.head.url + "/api/jobs/%s/logs/tail" % sid)
        self.assertEqual("".join(sock), "")
        r = self.head.ray("job", "logs", "--address", self.head.url, "--follow", sid)
        self.assertEqual(r.returncode, 0)
        self.assertIn("Status message: runtime_env setup failed: Failed to set up runtime environment.", r.stdout)

    def test_pending_message(self):
        sid = self.head.submit(entrypoint="true", entrypoint_resources={"TPU": 4},
                               runtime_env={"env_vars": {"A": "b"}})
        info = self.head.info(sid)
        self.assertEqual(info["status"], "PENDING")
        self.assertEqual(info["message"], "Job has not started yet. It may be waiting for resources (CPUs, GPUs, "
                                          "memory, custom resources) to become available. It may be waiting for the "
                                          "runtime environment to be set up.")
        self.assertEqual(http("POST", self.head.url + "/api/jobs/%s/stop" % sid), (200, '{"stopped": true}'))
        self.assertEqual(self.head.wait_status(sid)["status"], "STOPPED")


class PodAddressTest(unittest.TestCase):
    """Inside a pod the head binds KUBESIM_POD_IP, never 0.0.0.0, and loopback means the pod."""

    def test_binds_the_pod_ip_and_localizes_loopback(self):
        tmp = tempfile.mkdtemp(prefix="kubesim-ray-pod-")
        self.addCleanup(shutil.rmtree, tmp, True)
        head = Head(tmp, ip="127.0.3.7").start()
        self.addCleanup(head.stop)
        self.assertEqual(http("GET", head.url + "/api/gcs_healthz"), (200, "success"))
        loop = "http://127.0.0.1:%d" % head.dash_port
        with self.assertRaises(OSError):
            urllib.request.urlopen(loop + "/api/gcs_healthz", timeout=2)
        r = head.ray("job", "submit", "--address", loop, "--", "echo", "in pod",
                     env={"KUBESIM_POD_IP": "127.0.3.7"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("in pod\n", r.stdout)
        r = head.ray("job", "list", "--address", loop)
        self.assertEqual(r.returncode, 1)
        self.assertIn("Failed to connect to Ray at address", r.stderr)


class TokenAuthTest(unittest.TestCase):
    """RAY_AUTH_MODE=token on the head: Jobs API calls need `Authorization: Bearer <token>` (or
    KubeRay's `x-ray-authorization`); health endpoints stay open for the probes."""

    def test_token_auth(self):
        tmp = tempfile.mkdtemp(prefix="kubesim-ray-auth-")
        self.addCleanup(shutil.rmtree, tmp, True)
        head = Head(tmp, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN="s3cret").start()
        self.addCleanup(head.stop)
        self.assertEqual(http("GET", head.url + "/api/gcs_healthz"), (200, "success"))
        self.assertEqual(http("GET", head.url + "/api/jobs/")[0], 401)
        self.assertEqual(http("GET", head.url + "/api/jobs/", headers={"Authorization": "Bearer nope"})[0], 401)
        self.assertEqual(http("GET", head.url + "/api/jobs/", headers={"x-ray-authorization": "Bearer s3cret"}),
                         (200, "[]"))
        r = head.ray("job", "submit", "--address", head.url, "--", "echo", "authed",
                     env={"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "s3cret"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("authed\n", r.stdout)
        r = head.ray("job", "list", "--address", head.url, env={"RAY_AUTH_MODE": "", "RAY_AUTH_TOKEN": ""})
        self.assertEqual(r.returncode, 1)
        self.assertIn("Request failed with status code 401", r.stderr)


if __name__ == "__main__":
    unittest.main()
