"""ray start (head and worker), ray health-check, ray status, ray stop, signals, entrypoint resources."""

import json
import os
import signal
import subprocess
import time
import unittest

from raytest import RAY, Head, TmpTestCase, base_env, free_port, http, wait_until
from kubesim_ray.jobs import alive


class Worker:
    def __init__(self, head, ip, *extra, env=None):
        self.ip = ip
        self.agent_port = free_port()
        e = base_env(head.tmp, KUBESIM_POD_IP=ip, **(env or {}))
        self.out = open(os.path.join(head.tmp, "worker-%s.out" % ip), "w+")
        self.proc = subprocess.Popen(
            [RAY, "start", "--address=%s" % head.gcs, "--block", "--metrics-export-port=8080",
             "--dashboard-agent-listen-port=%d" % self.agent_port] + list(extra),
            env=e, stdout=self.out, stderr=subprocess.STDOUT, start_new_session=True)

    def output(self):
        self.out.flush()
        with open(self.out.name) as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.out.close()
        return self.proc.returncode


def watcher_of(supervisor_pid):
    """The pid of the fate-sharing watcher of a job supervisor in process supervisor_pid (once it
    has exec'd its shell loop), or None."""
    needle = b"while kill -s 0 %d;" % supervisor_pid
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                if needle in f.read():
                    return int(name)
        except OSError:
            pass
    return None


def kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


def read(path):
    with open(path) as f:
        return f.read()


def health_check(head, address, env=None):
    return subprocess.run([RAY, "health-check", "--address", address, "--skip-version-check"],
                          env=base_env(head.tmp, **(env or {})), capture_output=True, text=True, timeout=30)


def cluster(head):
    return json.loads(http("GET", "http://%s/kubesim/v1/cluster" % head.gcs)[1])


class ClusterTest(TmpTestCase):
    def test_head_start_health_check_and_worker_join(self):
        tmp = self.mkdtemp()
        head = Head(tmp, ip="127.0.5.1")
        # The worker's wait-gcs-ready loop fails until the head is up.
        self.assertEqual(health_check(head, head.gcs).returncode, 1)
        worker = Worker(head, "127.0.5.2", "--num-cpus=3", "--num-gpus=1")
        self.addCleanup(worker.stop)
        time.sleep(1.5)
        self.assertEqual(worker.proc.poll(), None)
        self.assertIn("Failed to connect to GCS at %s, retrying" % head.gcs, worker.output())
        head.start()
        self.addCleanup(head.stop)
        r = health_check(head, head.gcs)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""))
        out = head.output()
        self.assertIn("INFO scripts.py:925 -- Local node IP: 127.0.5.1", out)
        self.assertIn("SUCC scripts.py:942 -- Ray runtime started.", out)
        self.assertIn("ray start --address='%s'" % head.gcs, out)
        self.assertIn("This command will now block forever until terminated by a signal.", out)
        self.assertIn("kubesim Ray control-plane emulator", out)
        wait_until(lambda: len(cluster(head)["nodes"]) == 2, what="worker registration")
        self.assertIn("SUCC scripts.py:1064 -- Ray runtime started.", wait_until(
            lambda: "Ray runtime started." in worker.output() and worker.output()))
        self.assertEqual(http("GET", "http://127.0.5.2:%d/api/local_raylet_healthz" % worker.agent_port),
                         (200, "success"))
        self.assertEqual(http("GET", "http://127.0.5.2:%d/api/healthz" % worker.agent_port), (200, "success"))
        status = subprocess.run([RAY, "status", "--address", head.gcs], env=base_env(tmp), capture_output=True,
                                text=True, timeout=30)
        self.assertEqual(status.returncode, 0, status.stderr)
        self.assertIn(" 0.0/5.0 CPU", status.stdout)
        self.assertIn(" 0.0/1.0 GPU", status.stdout)
        # A job asking for a GPU runs "on" the worker (the process stays on the head host).
        sid = head.submit(entrypoint="echo gpu", entrypoint_num_gpus=1)
        info = head.wait_status(sid)
        self.assertEqual(info["status"], "SUCCEEDED")
        self.assertEqual(info["driver_agent_http_address"], "http://127.0.5.2:%d" % worker.agent_port)
        worker_id = [n["node_id"] for n in cluster(head)["nodes"] if not n["is_head"]][0]
        self.assertEqual(info["driver_node_id"], worker_id)
        # Ray's node shutdown hook exits 1 on SIGTERM.
        self.assertEqual(worker.stop(), 1)

    def test_job_waits_for_resources_until_a_node_offers_them(self):
        tmp = self.mkdtemp()
        head = Head(tmp, ip="127.0.5.1").start()
        self.addCleanup(head.stop)
        sid = head.submit(entrypoint="echo ran", entrypoint_resources={"TPU": 4})
        time.sleep(1.0)
        info = head.info(sid)
        self.assertEqual(info["status"], "PENDING")
        self.assertEqual(info["message"], "Job has not started yet. It may be waiting for resources (CPUs, GPUs, "
                                          "memory, custom resources) to become available.")
        worker = Worker(head, "127.0.5.3", "--num-cpus=1", '--resources={"TPU":4}')
        self.addCleanup(worker.stop)
        self.assertEqual(head.wait_status(sid)["status"], "SUCCEEDED")

    def test_entrypoint_resources_that_never_appear_time_out(self):
        tmp = self.mkdtemp()
        head = Head(tmp, RAY_JOB_START_TIMEOUT_SECONDS=1).start()
        self.addCleanup(head.stop)
        sid = head.submit(entrypoint="true", entrypoint_num_gpus=2)
        info = head.wait_status(sid, timeout=60)
        self.assertEqual((info["status"], info["error_type"]), ("FAILED", "JOB_SUPERVISOR_ACTOR_START_TIMEOUT"))
        self.assertTrue(info["message"].startswith("Job supervisor actor failed to start within 1.0 seconds."))
        self.assertIn("Try checking the cluster's available resources with `ray status`", info["message"])

    def test_sigterm_stops_jobs_and_exits_1(self):
        tmp = self.mkdtemp()
        head = Head(tmp).start()
        pidf = os.path.join(tmp, "p")
        sid = head.submit(entrypoint="echo $$ > %s; sleep 1000" % pidf)
        head.wait_status(sid, ("RUNNING",))
        wait_until(lambda: os.path.exists(pidf) and read(pidf).strip())
        with open(pidf) as f:
            pid = int(f.read())
        head.proc.send_signal(signal.SIGTERM)
        self.assertEqual(head.proc.wait(15), 1)
        head.log.close()
        self.assertFalse(alive(pid))

    def test_head_sigkill_still_kills_the_driver(self):
        tmp = self.mkdtemp()
        head = Head(tmp).start()
        self.addCleanup(head.log.close)
        pidf = os.path.join(tmp, "p")
        sid = head.submit(entrypoint="echo $$ > %s; sleep 1000" % pidf)
        head.wait_status(sid, ("RUNNING",))
        wait_until(lambda: os.path.exists(pidf) and read(pidf).strip())
        with open(pidf) as f:
            pid = int(f.read())
        self.addCleanup(kill_group, pid)  # the driver leads its group (start_new_session)
        # Ray's fate-sharing watcher (`while kill -s 0 <supervisor>; ...; kill -9 -<pgid>`) is
        # started just after the driver, in Ray as in the emulator: a head killed in between (a
        # busy host can pause it there for a while) leaves the driver running. It is the watcher
        # this test is about, so the head dies once the watcher runs.
        wait_until(lambda: watcher_of(head.proc.pid), what="the supervisor's fate-sharing watcher")
        head.proc.kill()
        head.proc.wait()
        wait_until(lambda: not alive(pid), timeout=30, what="driver killed by the watcher")

    def test_non_blocking_start_and_ray_stop(self):
        tmp = self.mkdtemp()
        env = base_env(tmp)
        gcs, dash, agent = free_port(), free_port(), free_port()
        r = subprocess.run([RAY, "start", "--head", "--port=%d" % gcs, "--dashboard-port=%d" % dash,
                            "--dashboard-agent-listen-port=%d" % agent, "--disable-usage-stats"],
                           env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Ray runtime started.", r.stdout)
        self.assertNotIn("--block", r.stdout)
        self.assertNotIn("Usage stats", r.stdout)
        self.assertEqual(http("GET", "http://127.0.0.1:%d/api/gcs_healthz" % dash), (200, "success"))
        r = subprocess.run([RAY, "stop"], env=env, capture_output=True, text=True, timeout=30)
        self.assertIn("Stopped all 1 Ray processes.", r.stdout)
        wait_until(lambda: subprocess.run([RAY, "health-check", "--address", "127.0.0.1:%d" % gcs], env=env,
                                          capture_output=True).returncode == 1, what="head to stop")

    def test_port_in_use_fails_like_ray(self):
        tmp = self.mkdtemp()
        head = Head(tmp).start()
        self.addCleanup(head.stop)
        r = subprocess.run([RAY, "start", "--head", "--port=%d" % head.gcs_port, "--block"], env=base_env(tmp),
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("Ray component gcs_server is trying to use a port number %d that is used by other components"
                      % head.gcs_port, r.stderr)

    def test_head_without_dashboard(self):
        tmp = self.mkdtemp()
        head = Head(tmp, extra_args=["--include-dashboard=false"])
        head.proc = subprocess.Popen(head.args, env=head.env, stdout=head.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.addCleanup(head.stop)
        wait_until(lambda: health_check(head, head.gcs).returncode == 0, what="GCS")
        with self.assertRaises(OSError):
            http("GET", head.url + "/api/version", timeout=2)

    def test_version(self):
        r = subprocess.run([RAY, "--version"], capture_output=True, text=True)
        self.assertEqual(r.stdout, "ray, version 2.60.0 (kubesim Ray control-plane emulator; the Python ray "
                                   "library is not emulated)\n")
        r = subprocess.run([RAY, "--version"], capture_output=True, text=True,
                           env=dict(os.environ, KUBESIM_RAY_VERSION="2.52.0"))
        self.assertTrue(r.stdout.startswith("ray, version 2.52.0 ("))


if __name__ == "__main__":
    unittest.main()
