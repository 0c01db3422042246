"""Unit tests of the pieces that copy Ray's rules (no processes)."""

import os
import subprocess
import unittest

import raytest  # first: puts kubesim_ray on sys.path
from kubesim_ray import runtime_env as renv
from kubesim_ray.cli import parse_options
from kubesim_ray.jobs import SubmitRequest, generate_job_id


class ParseUriTest(unittest.TestCase):
    def test_docstring_examples(self):
        self.assertEqual(renv.parse_uri("https://test.com/file.zip"), ("https", "https_test_com_file.zip"))
        self.assertEqual(renv.parse_uri("https://test.com/file.whl"), ("https", "file.whl"))
        self.assertEqual(renv.parse_uri("gcs://_ray_pkg_029f88d5ecc55e1e.zip"),
                         ("gcs", "_ray_pkg_029f88d5ecc55e1e.zip"))

    def test_query_string_is_not_part_of_the_cache_name(self):
        a = renv.parse_uri("https://s3.example.com/b/capsules/sha256-ab.zip?X-Amz-Signature=1&X-Amz-Date=2")
        b = renv.parse_uri("https://s3.example.com/b/capsules/sha256-ab.zip?X-Amz-Signature=9")
        self.assertEqual(a, b)
        self.assertEqual(a[1], "https_s3_example_com_b_capsules_sha256-ab.zip")

    def test_disallowed_characters_and_file_uris(self):
        self.assertEqual(renv.parse_uri("file:///mnt/capsule/my pkg(1)+x@y.zip")[1],
                         "file__mnt_capsule_my_pkg_1__x_y.zip")
        self.assertEqual(renv.parse_uri("http://h:8080/a.b.zip")[1], "http_h_8080_a_b.zip")

    def test_paths_and_bad_schemes(self):
        with self.assertRaisesRegex(ValueError, "Expected URI but received path /tmp/x"):
            renv.parse_uri("/tmp/x")
        with self.assertRaisesRegex(ValueError, 'Invalid protocol for runtime_env URI "ftp://h/x.zip"'):
            renv.parse_uri("ftp://h/x.zip")


class ValidateTest(unittest.TestCase):
    def test_working_dir_rules(self):
        renv.validate_runtime_env({"working_dir": "https://h/x.zip"})
        renv.validate_runtime_env({"working_dir": "file:///x.zip"})
        with self.assertRaisesRegex(ValueError, r"^Only \.zip or \.whl files supported for remote URIs\.$"):
            renv.validate_runtime_env({"working_dir": "https://h/x.tar.gz"})
        with self.assertRaisesRegex(ValueError, "^/local/dir is not a valid URI. Passing directories or modules"):
            renv.validate_runtime_env({"working_dir": "/local/dir"})
        with self.assertRaisesRegex(TypeError, "`working_dir` must be a string"):
            renv.validate_runtime_env({"working_dir": 3})

    def test_env_vars_and_pip(self):
        with self.assertRaisesRegex(TypeError, r"but the value 1 is of type <class 'int'>"):
            renv.validate_runtime_env({"env_vars": {"A": 1}})
        env = renv.validate_runtime_env({"pip": ["a==1", "a==1", "b"], "env_vars": {}})
        self.assertEqual(env, {"pip": {"packages": ["a==1", "b"], "pip_check": False}})


class ZipRulesTest(raytest.TmpTestCase):
    def unpack(self, entries):
        d = self.mkdtemp()
        z = raytest.make_zip(os.path.join(d, "p.zip"), entries)
        target = os.path.join(d, "out")
        renv.unzip_package(z, target, remove_top_level_directory=True, unlink_zip=False)
        out = []
        for root, dirs, files in os.walk(target):
            for n in dirs + files:
                out.append(os.path.relpath(os.path.join(root, n), target))
        return sorted(out)

    def test_single_top_level_directory_is_stripped(self):
        self.assertEqual(self.unpack({"capsule/": None, "capsule/run.py": "x", "capsule/d/f": "y"}),
                         ["d", "d/f", "run.py"])

    def test_without_directory_entries_too(self):
        self.assertEqual(self.unpack({"capsule/run.py": "x"}), ["run.py"])

    def test_macosx_dir_is_ignored_and_removed(self):
        self.assertEqual(self.unpack({"capsule/run.py": "x", "__MACOSX/capsule/._run.py": "m"}), ["run.py"])

    def test_two_top_level_entries_are_kept(self):
        self.assertEqual(self.unpack({"run.py": "x", "lib/u.py": "y"}), ["lib", "lib/u.py", "run.py"])
        self.assertEqual(self.unpack({"a/x": "1", "b/y": "2"}), ["a", "a/x", "b", "b/y"])

    def test_single_top_level_file_is_kept(self):
        self.assertEqual(self.unpack({"run.py": "x"}), ["run.py"])


class SubmitRequestTest(unittest.TestCase):
    def test_errors_are_the_dataclass_errors(self):
        with self.assertRaisesRegex(TypeError, "unexpected keyword argument 'key'"):
            SubmitRequest({"entrypoint": "x", "key": 1})
        with self.assertRaisesRegex(TypeError, "missing 1 required positional argument: 'entrypoint'"):
            SubmitRequest({})
        with self.assertRaisesRegex(TypeError, "entrypoint must be a string"):
            SubmitRequest({"entrypoint": 1})
        SubmitRequest({"entrypoint": "x", "submission_id": None})  # None values are stripped

    def test_generated_ids(self):
        sid = generate_job_id()
        self.assertRegex(sid, r"^raysubmit_[A-Za-z1-9]{16}$")
        self.assertNotRegex(sid[10:], "[IloO0]")


class CliParseTest(unittest.TestCase):
    def test_kuberay_rendering_and_unknown_flags(self):
        opts, pos, rest = parse_options(
            ["--head", "--dashboard-host=0.0.0.0", "--num-cpus=1", "--block", "--unknown-flag",
             "--metrics-export-port=8080", "--resources={\"TPU\":4}"],
            {"dashboard_host", "num_cpus", "resources"}, {"head", "block"})
        self.assertEqual(opts, {"head": True, "dashboard_host": "0.0.0.0", "num_cpus": "1", "block": True,
                                "resources": '{"TPU":4}'})

    def test_entrypoint_after_double_dash(self):
        opts, pos, rest = parse_options(["--address", "http://a", "--no-wait", "--", "python3", "-c", "print(42)"],
                                        {"address"}, {"no_wait"}, stop_at_positional=True)
        self.assertEqual(rest, ["python3", "-c", "print(42)"])
        self.assertEqual(opts, {"address": "http://a", "no_wait": True})

    def test_entrypoint_join_is_posix_shell_safe(self):
        # `ray job submit -- python3 -c 'print(42)'` reaches the shell as one argument again.
        import shlex

        joined = shlex.join(["python3", "-c", "print(42)"])
        out = subprocess.run(joined, shell=True, capture_output=True, text=True)
        self.assertEqual(out.stdout, "42\n")
        # Ray before PR #63797 (list2cmdline) would have broken it.
        old = subprocess.list2cmdline(["python3", "-c", "print(42)"])
        self.assertNotEqual(subprocess.run(old, shell=True, capture_output=True).returncode, 0)


if __name__ == "__main__":
    unittest.main()
