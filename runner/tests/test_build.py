"""runner.pyz is deterministic, well-formed, and the C++ embedding round-trips."""

import io
import os
import re
import shutil
import subprocess
import tempfile
import unittest
import zipfile

import support  # first: puts runner/ on sys.path

import build_zipapp
import embed_zipapp


class BuildTest(unittest.TestCase):
    def copy_sources(self, parent, mtime):
        target = os.path.join(parent, "src")
        shutil.copytree(os.path.join(support.RUNNER_DIR, "starforge_runner"),
                        os.path.join(target, "starforge_runner"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        for dirpath, _dirnames, filenames in os.walk(target):
            for name in filenames:
                path = os.path.join(dirpath, name)
                os.utime(path, (mtime, mtime))
                os.chmod(path, 0o600 if mtime % 2 else 0o664)
        return target

    def test_same_sources_in_two_places_give_identical_bytes(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            first = self.copy_sources(a, 1000000001)
            second = self.copy_sources(os.path.join(b, "deeper"), 1700000000)
            # Things that are not sources must not change the archive.
            os.makedirs(os.path.join(second, "starforge_runner", "__pycache__"))
            with open(os.path.join(second, "starforge_runner", "__pycache__", "x.pyc"), "wb") as f:
                f.write(b"junk")
            with open(os.path.join(second, "starforge_runner", "notes.txt"), "w") as f:
                f.write("not python")
            # Nor do Windows line endings in a checkout.
            cli = os.path.join(second, "starforge_runner", "cli.py")
            with open(cli, "rb") as f:
                text = f.read()
            with open(cli, "wb") as f:
                f.write(text.replace(b"\n", b"\r\n"))
            one = build_zipapp.build(first)
            two = build_zipapp.build(second)
        self.assertEqual(one, two)
        self.assertEqual(one, build_zipapp.build())
        self.assertEqual(one, support.runner_bytes())

    def test_build_twice_through_the_script(self):
        with tempfile.TemporaryDirectory() as d:
            paths = [os.path.join(d, "a.pyz"), os.path.join(d, "b.pyz")]
            for path in paths:
                subprocess.check_call([support.PYTHON, "-B",
                                       os.path.join(support.RUNNER_DIR, "build_zipapp.py"),
                                       "--output", path])
            with open(paths[0], "rb") as f, open(paths[1], "rb") as g:
                self.assertEqual(f.read(), g.read())

    def test_archive_layout(self):
        data = support.runner_bytes()
        self.assertTrue(data.startswith(b"#!/usr/bin/env python3\n"))
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            infos = z.infolist()
            names = [i.filename for i in infos]
            self.assertEqual(names, sorted(names))
            self.assertIn("__main__.py", names)
            self.assertIn("starforge_runner/cli.py", names)
            self.assertFalse([n for n in names if "__pycache__" in n or not n.endswith(".py")])
            for info in infos:
                self.assertEqual(info.date_time, (1980, 1, 1, 0, 0, 0))
                self.assertEqual(info.external_attr, 0o100644 << 16)
                self.assertEqual(info.create_system, 3)
                self.assertEqual(info.compress_type, zipfile.ZIP_DEFLATED)
                self.assertEqual(info.extra, b"")
            self.assertIsNone(z.testzip())

    def test_matches_the_cmake_build(self):
        built = os.environ.get("STARFORGE_RUNNER_PYZ")
        if not built:
            self.skipTest("STARFORGE_RUNNER_PYZ is not set (set by ctest)")
        with open(built, "rb") as f:
            self.assertEqual(f.read(), support.runner_bytes(),
                             "the build's runner.pyz differs from a fresh build of the sources")

    def test_embedding_round_trips(self):
        data = support.runner_bytes()
        text = embed_zipapp.render(data).decode("ascii")
        self.assertIn("std::string_view Zipapp()", text)
        self.assertIn('#include "starforge/runner/embedded.h"', text)
        self.assertIn(support.sha256(data), text)
        body = text.split("kZipapp[] = {", 1)[1].split("};", 1)[0]
        decoded = bytes(int(h, 16) for h in re.findall(r"0x([0-9a-f]{2}),", body))
        self.assertEqual(decoded, data)


class CommandLineTest(support.RunnerTest):
    def test_help(self):
        code, out, err = self.run_runner(command=[support.PYTHON, support.runner_path(), "--help"])
        self.assertEqual(code, 0, err)
        text = out.decode()
        for word in ("run", "verify", "FORGE_JOB_ID", "FORGE_RUNNER_GRACE_S", "exit codes"):
            self.assertIn(word, text)

    def test_no_command_is_a_usage_error(self):
        code, out, err = self.run_runner(command=[support.PYTHON, support.runner_path()])
        self.assertEqual(code, 64)
        self.assertIn("usage", err)

    def test_run_takes_no_argv(self):
        # The argv comes from the capsule's jobspec.json, never from the runner's command line.
        self.make(support.py("print('hi')"))
        code, out, err = self.run_runner("run", "python", "evil.py")
        self.assertEqual(code, 64)
        self.assertIn("unrecognized arguments", err)
        self.assertFalse(os.path.exists(self.job_dir))


if __name__ == "__main__":
    unittest.main()
