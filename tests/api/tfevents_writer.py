# /// script
# requires-python = ">=3.9"
# dependencies = ["tensorboardX==2.6.2.2", "numpy<2.3", "protobuf>=3.20,<6"]
# ///
"""Writes TensorBoard event files with a real writer (tensorboardX) for tests/api/metrics_test.cc.

    uv run --script tests/api/tfevents_writer.py DIR

DIR/runs/a/: train/loss = 1/(step+1) and train/acc = step/10 at steps 0..9 as simple_value
(add_scalar: what tensorboardX, PyTorch's SummaryWriter and Lightning write); DIR/runs/b/:
eval/score = 0.5 at step 0 as a float tensor with float_val and 0.75 at step 5 as a double tensor
with tensor_content (TF2's tf.summary.scalar writes scalars as tensors), through the same writer,
and a histogram at step 5, which is not a scalar.
"""

import struct
import sys

import numpy as np
from tensorboardX import SummaryWriter
from tensorboardX.proto.summary_pb2 import Summary
from tensorboardX.proto.tensor_pb2 import TensorProto

out = sys.argv[1]
a = SummaryWriter(f"{out}/runs/a")
for step in range(10):
    a.add_scalar("train/loss", 1.0 / (step + 1), step)
    a.add_scalar("train/acc", step / 10, step)
a.close()
b = SummaryWriter(f"{out}/runs/b")
float_tensor = TensorProto(dtype=1, float_val=[0.5])  # DT_FLOAT
double_tensor = TensorProto(dtype=2, tensor_content=struct.pack("<d", 0.75))  # DT_DOUBLE
b.file_writer.add_summary(Summary(value=[Summary.Value(tag="eval/score", tensor=float_tensor)]), 0)
b.file_writer.add_summary(Summary(value=[Summary.Value(tag="eval/score", tensor=double_tensor)]), 5)
b.add_histogram("eval/weights", np.arange(100, dtype=np.float32), 5)
b.close()
