"""`run`: exit codes, the job's environment and working directory, argv, executable bits,
nemo-rl, and the runner's own errors."""

import json
import os
import unittest

import support

# Writes the job's view of the world (cwd, argv, selected env) to $OUT as JSON.
REPORT = r"""
import json, os, sys
keys = ["FORGE_JOB_ID", "FORGE_JOB_DIR", "FORGE_CODE_DIR", "FORGE_NEMO_RL_DIR",
        "RAY_ENABLE_UV_RUN_RUNTIME_ENV", "PYTHONUNBUFFERED", "MY_SETTING", "FORGE_CAPSULE_SHA256"]
with open(os.environ["OUT"], "w") as f:
    json.dump({"cwd": os.getcwd(), "argv": sys.argv[1:],
               "env": {k: os.environ.get(k) for k in keys}}, f)
"""


class ExitCodeTest(support.RunnerTest):
    def check(self, code_snippet, runner_code, state, **expected):
        self.make(support.py(code_snippet))
        code, out, err = self.run_runner()
        self.assertEqual(code, runner_code, err)
        status = self.status()
        self.assertEqual(status["state"], state)
        for key, value in expected.items():
            self.assertEqual(status[key], value)
        self.assertIn("finishedAt", status)
        return status

    def test_success(self):
        status = self.check("print('done')", 0, "succeeded", exitCode=0)
        self.assertNotIn("signal", status)
        self.assertNotIn("error", status)

    def test_failure_code_is_passed_through(self):
        status = self.check("import sys; sys.exit(3)", 3, "failed", exitCode=3)
        self.assertNotIn("error", status)

    def test_killed_by_a_signal_exits_like_a_shell(self):
        status = self.check("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 128 + 9,
                            "signalled", signal=9, signalName="SIGKILL")
        self.assertNotIn("exitCode", status)
        self.assertNotIn("forcedKill", status)
        self.check("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", 128 + 15,
                   "signalled", signal=15, signalName="SIGTERM")

    def test_program_not_found(self):
        self.make(["no-such-program-for-starforge", "x"])
        code, out, err = self.run_runner(PATH=os.pathsep.join(("/usr/bin", "/bin")))
        self.assertEqual(code, 127)
        self.assertIn("no-such-program-for-starforge", err)
        status = self.status()
        self.assertEqual((status["state"], status["exitCode"]), ("failed", 127))
        self.assertIn("no-such-program-for-starforge", status["error"])

    def test_program_not_executable(self):
        self.make(["./data.txt"], files={"data.txt": "not a program\n"})
        code, out, err = self.run_runner()
        self.assertEqual(code, 126, err)
        self.assertIn("./data.txt", err)


class EnvironmentTest(support.RunnerTest):
    def setUp(self):
        support.RunnerTest.setUp(self)
        self.out = os.path.join(self.tmp, "report.json")

    def report(self):
        with open(self.out) as f:
            return json.load(f)

    def test_environment_cwd_and_argv(self):
        # Words that two shells would mangle reach the program verbatim.
        words = ["a b", "$HOME", "'q'", "\"dq\"", ";", "$(id)", "", "*", "ünï"]
        self.make([support.PYTHON, "report.py"] + words, files={"report.py": REPORT},
                  env={"OUT": self.out, "MY_SETTING": "from-jobspec", "PYTHONUNBUFFERED": ""})
        code, out, err = self.run_runner(FORGE_JOB_DIR="/stale", FORGE_CAPSULE_SHA256="ab" * 32)
        self.assertEqual(code, 0, err)
        seen = self.report()
        self.assertEqual(seen["cwd"], self.capsule)
        self.assertEqual(seen["argv"], words)
        env = seen["env"]
        self.assertEqual(env["FORGE_JOB_ID"], support.JOB_ID)
        self.assertEqual(env["FORGE_JOB_DIR"], self.job_dir)
        self.assertEqual(env["FORGE_CODE_DIR"], self.capsule)
        self.assertEqual(env["MY_SETTING"], "from-jobspec")
        self.assertEqual(env["FORGE_CAPSULE_SHA256"], "ab" * 32)
        self.assertEqual(env["PYTHONUNBUFFERED"], "")  # the JobSpec's value wins
        self.assertIsNone(env["RAY_ENABLE_UV_RUN_RUNTIME_ENV"])
        self.assertEqual(self.status()["capsuleSha256"], "ab" * 32)

    def test_python_output_is_unbuffered_by_default(self):
        self.make([support.PYTHON, "report.py"], files={"report.py": REPORT},
                  env={"OUT": self.out})
        self.assertEqual(self.run_runner()[0], 0)
        self.assertEqual(self.report()["env"]["PYTHONUNBUFFERED"], "1")

    def test_started_from_another_directory(self):
        self.make([support.PYTHON, "report.py"], files={"report.py": REPORT},
                  env={"OUT": self.out})
        runner = os.path.join(self.capsule, ".starforge", "runner.pyz")
        code, out, err = self.run_runner(command=[support.PYTHON, runner, "run"], cwd=self.tmp)
        self.assertEqual(code, 0, err)
        self.assertEqual(self.report()["cwd"], self.capsule)
        self.assertEqual(self.report()["env"]["FORGE_CODE_DIR"], self.capsule)

    def test_nemo_rl_runs_from_the_nemo_rl_dir(self):
        nemo = os.path.join(self.tmp, "nemo-rl")
        os.makedirs(nemo)
        self.make([support.PYTHON, os.path.join(self.capsule, "report.py"), "--config",
                   "conf.yaml"], files={"report.py": REPORT, "conf.yaml": "x: 1\n"},
                  env={"OUT": self.out}, recipe="nemo-rl")
        code, out, err = self.run_runner(FORGE_NEMO_RL_DIR=nemo)
        self.assertEqual(code, 0, err)
        seen = self.report()
        self.assertEqual(seen["cwd"], nemo)
        self.assertEqual(seen["env"]["FORGE_NEMO_RL_DIR"], nemo)
        self.assertEqual(seen["env"]["RAY_ENABLE_UV_RUN_RUNTIME_ENV"], "0")
        self.assertEqual(seen["env"]["FORGE_CODE_DIR"], self.capsule)
        self.assertTrue(os.path.isfile(os.path.join(seen["env"]["FORGE_CODE_DIR"], "conf.yaml")))

    def test_nemo_rl_without_its_directory(self):
        self.make(support.py("print(1)"), recipe="nemo-rl")
        missing = os.path.join(self.tmp, "absent")
        code, out, err = self.run_runner(FORGE_NEMO_RL_DIR=missing)
        self.assertEqual(code, 78)
        self.assertIn("FORGE_NEMO_RL_DIR (%s)" % missing, err)
        self.assertEqual(self.status()["exitCode"], 78)
        # The default is /opt/nemo-rl.
        if not os.path.isdir("/opt/nemo-rl"):
            code, out, err = self.run_runner(FORGE_NEMO_RL_DIR=None)
            self.assertEqual(code, 78)
            self.assertIn("/opt/nemo-rl", err)


class ExecutableBitsTest(support.RunnerTest):
    def test_modes_are_restored_from_the_manifest(self):
        files = {"bin/tool.sh": "#!/bin/sh\necho tool ran \"$1\"\n", "data.txt": "data\n",
                 "run.sh": "#!/bin/sh\nexec ./bin/tool.sh \"$@\"\n"}
        self.make(["./run.sh", "arg"], files=files, executable=("run.sh", "bin/tool.sh"))
        os.chmod(os.path.join(self.capsule, "data.txt"), 0o755)  # the manifest says no x
        self.assertEqual(self.mode("run.sh"), 0o644)  # as Ray's unzip leaves it
        code, out, err = self.run_runner()
        self.assertEqual(code, 0, err)
        self.assertEqual(out, b"tool ran arg\n")
        self.assertEqual(self.mode("run.sh"), 0o755)
        self.assertEqual(self.mode("bin/tool.sh"), 0o755)
        self.assertEqual(self.mode("data.txt"), 0o644)


class RunnerErrorTest(support.RunnerTest):
    def test_job_id_is_required(self):
        marker = os.path.join(self.tmp, "ran")
        self.make(support.py("open(%r, 'w').close()" % marker))
        for value in (None, "", "../escape"):
            with self.subTest(job_id=value):
                code, out, err = self.run_runner(FORGE_JOB_ID=value)
                self.assertEqual(code, 78)
                self.assertIn("FORGE_JOB_ID", err)
        self.assertFalse(os.path.exists(marker))

    def test_bad_jobspec(self):
        cases = [
            (dict(support.jobspec([])), "\"entrypoint\" must be a non-empty list"),
            (dict(support.jobspec(["python", 3])), "\"entrypoint\" must be a non-empty list"),
            (dict(support.jobspec(["true"]), env={"A": 1}), "\"env\" must map names to strings"),
            ([], "expected a JSON object"),
        ]
        for spec, needle in cases:
            with self.subTest(needle=needle):
                self.make(None, spec=spec)
                code, out, err = self.run_runner()
                self.assertEqual(code, 78, err)
                self.assertIn(".starforge/jobspec.json: " + needle, err)
                self.assertIn(needle, self.status()["error"])

    def test_bad_runner_settings_fall_back_with_a_warning(self):
        self.make(support.py("print('ok')"))
        code, out, err = self.run_runner(FORGE_RUNNER_GRACE_S="soon", FORGE_RUNNER_HEARTBEAT_S="0")
        self.assertEqual(code, 0, err)
        self.assertIn("FORGE_RUNNER_GRACE_S: expected a non-negative number of seconds, got "
                      "'soon'; using 30", err)
        self.assertIn("FORGE_RUNNER_HEARTBEAT_S: expected a positive number", err)
        self.assertEqual(out, b"ok\n")


if __name__ == "__main__":
    unittest.main()
