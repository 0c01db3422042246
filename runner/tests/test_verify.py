"""Manifest verification: `verify`, and `run` refusing a tampered capsule."""

import json
import os
import unittest

import support

FILES = {"train.py": "print('training')\n", "conf/a.yaml": "lr: 0.1\n", "tool.sh": "#!/bin/sh\n"}


class VerifyTest(support.RunnerTest):
    def setUp(self):
        support.RunnerTest.setUp(self)
        marker = os.path.join(self.tmp, "ran")
        self.marker = marker
        self.make(support.py("open(%r, 'w').close()" % marker), files=FILES,
                  executable=("tool.sh",))

    def path(self, rel):
        return os.path.join(self.capsule, *rel.split("/"))

    def verify(self):
        return self.run_runner("verify")

    def assert_refused(self, *needles):
        code, out, err = self.verify()
        self.assertEqual(code, 65, err)
        for needle in needles:
            self.assertIn(needle, err)
        self.assertIn("capsule verification failed", err)
        # `run` refuses too, before the job starts, and records why.
        code, out, err = self.run_runner("run")
        self.assertEqual(code, 65, err)
        for needle in needles:
            self.assertIn(needle, err)
        self.assertFalse(os.path.exists(self.marker), "the job ran despite tampering")
        status = self.status()
        self.assertEqual(status["state"], "failed")
        self.assertEqual(status["exitCode"], 65)
        self.assertIn(needles[0], status["error"])
        self.assertNotIn("pid", status)
        self.assertIn(needles[0], self.driver_log().decode())
        return err

    def test_intact_capsule_verifies_and_changes_nothing(self):
        code, out, err = self.verify()
        self.assertEqual(code, 0, err)
        self.assertIn(b"ok: 5 files", out)  # 3 user files, jobspec.json, runner.pyz
        self.assertEqual(err, "")
        self.assertEqual(self.mode("tool.sh"), 0o644)  # verify only looks
        code, out, err = self.run_runner("verify", "--quiet")
        self.assertEqual((code, out), (0, b""))

    def test_changed_byte(self):
        with open(self.path("conf/a.yaml"), "r+b") as f:
            f.write(b"L")  # same size, different content
        self.assert_refused("conf/a.yaml: content changed")

    def test_missing_file(self):
        os.remove(self.path("train.py"))
        self.assert_refused("train.py: missing")

    def test_wrong_size(self):
        with open(self.path("train.py"), "ab") as f:
            f.write(b"#")
        self.assert_refused("train.py: size is 19 bytes, the manifest says 18")

    def test_changed_jobspec(self):
        with open(self.path(".starforge/jobspec.json"), "r+b") as f:
            f.seek(3)
            f.write(b"N")
        self.assert_refused(".starforge/jobspec.json: content changed")

    def test_directory_in_place_of_a_file(self):
        os.remove(self.path("tool.sh"))
        os.mkdir(self.path("tool.sh"))
        self.assert_refused("tool.sh: not a regular file")

    def test_extra_file_under_starforge(self):
        with open(self.path(".starforge/extra.py"), "w") as f:
            f.write("x")
        self.assert_refused(".starforge/extra.py: not in the manifest")

    def test_every_problem_is_named(self):
        os.remove(self.path("train.py"))
        with open(self.path("tool.sh"), "ab") as f:
            f.write(b"\n")
        err = self.assert_refused("train.py: missing", "tool.sh: size is", "2 problems")
        self.assertIn("tool.sh: size", self.status()["error"])
        del err

    def test_unlisted_user_files_are_reported_not_fatal(self):
        os.makedirs(self.path("outputs"))
        with open(self.path("outputs/run1.txt"), "w") as f:
            f.write("left by an earlier run")
        code, out, err = self.verify()
        self.assertEqual(code, 0, err)
        self.assertIn("1 file in the capsule directory is not in its manifest",
                      err)
        self.assertIn("outputs/run1.txt", err)
        code, out, err = self.run_runner("run")
        self.assertEqual(code, 0, err)
        self.assertTrue(os.path.exists(self.marker))
        self.assertEqual(err.count("outputs/run1.txt"), 1)

    def test_missing_manifest(self):
        os.remove(self.path(".starforge/manifest.json"))
        self.assert_refused(".starforge/manifest.json is missing")

    def test_malformed_manifests(self):
        with open(self.path(".starforge/manifest.json")) as f:
            good = f.read()
        entry = {"path": "train.py", "size": 18, "sha256": "0" * 64, "executable": False}
        cases = [
            ("{not json", "not valid JSON"),
            (json.dumps({"version": 2, "files": []}), "version 2 is not supported"),
            (json.dumps({"version": 1}), "\"files\" must be a list"),
            (json.dumps({"version": 1, "files": [dict(entry, path="../x")]}), "'..'"),
            (json.dumps({"version": 1, "files": [dict(entry, path="/etc/passwd")]}),
             "must be relative"),
            (json.dumps({"version": 1, "files": [dict(entry, sha256="ABC")]}), "\"sha256\""),
            (json.dumps({"version": 1, "files": [dict(entry, size=-1)]}), "\"size\""),
            (json.dumps({"version": 1, "files": [dict(entry, executable="no")]}),
             "\"executable\""),
            (json.dumps({"version": 1, "files": [entry, entry]}), "listed twice"),
        ]
        for text, needle in cases:
            with self.subTest(needle=needle):
                with open(self.path(".starforge/manifest.json"), "w") as f:
                    f.write(text)
                code, out, err = self.verify()
                self.assertEqual(code, 65, err)
                self.assertIn(needle, err)
                self.assertIn(".starforge/manifest.json", err)
        with open(self.path(".starforge/manifest.json"), "w") as f:
            f.write(good)
        self.assertEqual(self.verify()[0], 0)

    def test_capsule_dir_option_and_location_of_the_runner(self):
        # Run from elsewhere: the runner finds the capsule it sits in; --capsule-dir overrides.
        runner = os.path.join(self.capsule, ".starforge", "runner.pyz")
        code, out, err = self.run_runner(command=[support.PYTHON, runner, "verify"],
                                         cwd=self.tmp)
        self.assertEqual(code, 0, err)
        code, out, err = self.run_runner(command=[support.PYTHON, support.runner_path(),
                                                  "verify", "--capsule-dir", self.capsule],
                                         cwd=self.tmp)
        self.assertEqual(code, 0, err)
        code, out, err = self.run_runner(command=[support.PYTHON, support.runner_path(),
                                                  "verify"], cwd=self.tmp)
        self.assertEqual(code, 65)
        self.assertIn("manifest.json is missing", err)


if __name__ == "__main__":
    unittest.main()
