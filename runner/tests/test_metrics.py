"""starforge_runner.metrics: a job imports it from its capsule's .starforge/runner.pyz and its
points land in $FORGE_JOB_DIR/metrics.jsonl, one whole JSON line each."""

import json
import os
import sys
import tempfile
import threading
import unittest

import support

# What a job does (examples/tiny-train/train.py does the same).
JOB = r"""
import os, sys
sys.path.insert(0, os.path.join(os.environ["FORGE_CODE_DIR"], ".starforge", "runner.pyz"))
from starforge_runner import metrics
for step in range(3):
    metrics.log(step, loss=1.0 / (step + 1), accuracy=step / 2)
metrics.log(loss=float("nan"), lr=0.1)
"""


class MetricsInACapsuleTest(support.RunnerTest):
    def test_a_job_logs_metrics_from_the_shipped_runner(self):
        self.make(support.py(JOB))
        code, _, err = self.run_runner()
        self.assertEqual(code, 0, err)
        with open(os.path.join(self.job_dir, "metrics.jsonl")) as f:
            records = [json.loads(line) for line in f]
        self.assertEqual([r.get("step") for r in records], [0, 1, 2, None])
        self.assertEqual(records[1]["loss"], 0.5)
        self.assertEqual(records[2]["accuracy"], 1.0)
        self.assertNotIn("loss", records[3])  # NaN is not JSON: left out
        self.assertEqual(records[3]["lr"], 0.1)
        self.assertTrue(all(isinstance(r["time"], float) for r in records))


class WriterTest(unittest.TestCase):
    def setUp(self):
        sys.path.insert(0, support.RUNNER_DIR)
        from starforge_runner import metrics
        self.metrics = metrics
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "metrics.jsonl")

    def tearDown(self):
        self.dir.cleanup()

    def test_bad_values_are_refused(self):
        with self.metrics.Writer(self.path) as w:
            with self.assertRaises(TypeError):
                w.log(1, loss="low")
            with self.assertRaises(TypeError):
                w.log(1.5, loss=1)
            with self.assertRaises(ValueError):
                w.log(1, **{"time": 2})
        self.assertFalse(os.path.exists(self.path))

    def test_threads_never_interleave_lines(self):
        with self.metrics.Writer(self.path) as w:
            def work(k):
                for i in range(200):
                    w.log(i, **{"m%d" % k: float(i)})
            threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        with open(self.path) as f:
            lines = f.read().splitlines()
        self.assertEqual(len(lines), 800)
        for line in lines:
            json.loads(line)


if __name__ == "__main__":
    unittest.main()
