#!/usr/bin/env python3
"""tiny-train: a small, real training loop in pure Python (standard library only).

A two-layer perceptron (2 inputs -> 16 tanh units -> 1 sigmoid output) learns to separate two
interleaved half-moons by mini-batch gradient descent with momentum, minimising the binary
cross-entropy. Everything is seeded, so every run prints the same falling loss curve:

    step 10 loss 0.6512
    ...
    step 200 loss 0.0623

Each logged step also goes to $FORGE_JOB_DIR/metrics.jsonl (loss and accuracy, through the
runner's starforge_runner.metrics, shipped in every capsule as .starforge/runner.pyz), which
the web console draws as training curves while the job runs.

At the end it writes a checkpoint (the weights and the step, JSON) into
$FORGE_JOB_DIR/checkpoints/ -- the job's directory when StarForge runs it -- or ./checkpoints
when run by hand, and prints where.
"""

import argparse
import json
import math
import os
import random
import sys
import time


def make_moons(n, noise, rng):
    """n points on two interleaved half circles, labelled 1 (upper) and 0 (lower)."""
    data = []
    for i in range(n):
        t = math.pi * rng.random()
        if i % 2 == 0:
            x, y, label = math.cos(t), math.sin(t), 1.0
        else:
            x, y, label = 1.0 - math.cos(t), 0.5 - math.sin(t), 0.0
        # Centred near the origin so that tanh units start in their linear range.
        data.append(((x - 0.5 + rng.gauss(0, noise), y - 0.25 + rng.gauss(0, noise)), label))
    return data


def sigmoid(z):
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


class MLP:
    def __init__(self, hidden, rng):
        scale = 1.0 / math.sqrt(2)
        self.w1 = [[rng.gauss(0, scale) for _ in range(2)] for _ in range(hidden)]
        self.b1 = [0.0] * hidden
        self.w2 = [rng.gauss(0, 1.0 / math.sqrt(hidden)) for _ in range(hidden)]
        self.b2 = 0.0

    def forward(self, x):
        h = [math.tanh(w[0] * x[0] + w[1] * x[1] + b) for w, b in zip(self.w1, self.b1)]
        p = sigmoid(sum(w * hi for w, hi in zip(self.w2, h)) + self.b2)
        return h, p

    def loss_and_grads(self, batch):
        """Mean binary cross-entropy over `batch` and its gradients."""
        n_hidden = len(self.b1)
        g_w1 = [[0.0, 0.0] for _ in range(n_hidden)]
        g_b1 = [0.0] * n_hidden
        g_w2 = [0.0] * n_hidden
        g_b2 = 0.0
        loss = 0.0
        for x, y in batch:
            h, p = self.forward(x)
            p = min(max(p, 1e-12), 1.0 - 1e-12)
            loss -= y * math.log(p) + (1.0 - y) * math.log(1.0 - p)
            d_out = p - y  # d loss / d logit
            g_b2 += d_out
            for j in range(n_hidden):
                g_w2[j] += d_out * h[j]
                d_h = d_out * self.w2[j] * (1.0 - h[j] * h[j])
                g_w1[j][0] += d_h * x[0]
                g_w1[j][1] += d_h * x[1]
                g_b1[j] += d_h
        n = len(batch)
        scale = 1.0 / n
        return loss / n, {
            "w1": [[g * scale for g in row] for row in g_w1],
            "b1": [g * scale for g in g_b1],
            "w2": [g * scale for g in g_w2],
            "b2": g_b2 * scale,
        }

    def params(self):
        return {"w1": self.w1, "b1": self.b1, "w2": self.w2, "b2": self.b2}


def sgd_step(model, grads, velocity, lr, momentum):
    for j in range(len(model.b1)):
        for k in range(2):
            velocity["w1"][j][k] = momentum * velocity["w1"][j][k] - lr * grads["w1"][j][k]
            model.w1[j][k] += velocity["w1"][j][k]
        velocity["b1"][j] = momentum * velocity["b1"][j] - lr * grads["b1"][j]
        model.b1[j] += velocity["b1"][j]
        velocity["w2"][j] = momentum * velocity["w2"][j] - lr * grads["w2"][j]
        model.w2[j] += velocity["w2"][j]
    velocity["b2"] = momentum * velocity["b2"] - lr * grads["b2"]
    model.b2 += velocity["b2"]


def metrics_logger():
    """starforge_runner.metrics.log from the capsule's runner (StarForge's curves), or, when run
    by hand outside a capsule, a stand-in that writes the same lines to ./metrics.jsonl."""
    runner = os.path.join(os.environ.get("FORGE_CODE_DIR", ""), ".starforge", "runner.pyz")
    if os.path.isfile(runner):
        sys.path.insert(0, runner)
        from starforge_runner import metrics
        return metrics.log

    def log(step, **scalars):
        with open("metrics.jsonl", "a") as f:
            f.write(json.dumps(dict(step=step, time=round(time.time(), 3), **scalars)) + "\n")
    return log


def accuracy_of(model, data):
    return sum(1 for x, y in data if (model.forward(x)[1] >= 0.5) == (y == 1.0)) / len(data)


def save_checkpoint(model, step, loss, accuracy):
    job_dir = os.environ.get("FORGE_JOB_DIR")
    directory = os.path.join(job_dir, "checkpoints") if job_dir else "checkpoints"
    os.makedirs(directory, exist_ok=True)
    path = os.path.abspath(os.path.join(directory, "tiny-train-step%d.json" % step))
    state = {"step": step, "loss": loss, "accuracy": accuracy, "params": model.params()}
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)  # a reader never sees half a checkpoint
    return path


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--pause", type=float, default=0.0,
                        help="seconds to sleep after each logged step (to watch the curves grow)")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.examples < 2 or args.batch < 1 or args.hidden < 1 or args.log_every < 1:
        parser.error("--steps, --examples (2), --batch, --hidden and --log-every must be at least 1")

    rng = random.Random(args.seed)
    data = make_moons(args.examples, 0.1, rng)
    model = MLP(args.hidden, rng)
    velocity = {"w1": [[0.0, 0.0] for _ in model.b1], "b1": [0.0] * len(model.b1),
                "w2": [0.0] * len(model.b1), "b2": 0.0}
    print("tiny-train: %d examples, %d hidden units, %d steps of batch %d (seed %d)"
          % (len(data), args.hidden, args.steps, args.batch, args.seed), flush=True)
    log_metrics = metrics_logger()
    start = time.monotonic()
    # The loss printed is over the whole dataset, not one noisy batch: the curve means something.
    full_loss = model.loss_and_grads(data)[0]
    print("step 0 loss %.4f" % full_loss, flush=True)
    log_metrics(0, loss=full_loss, accuracy=accuracy_of(model, data))
    for step in range(1, args.steps + 1):
        batch = rng.sample(data, min(args.batch, len(data)))
        _, grads = model.loss_and_grads(batch)
        sgd_step(model, grads, velocity, args.lr, args.momentum)
        if step % args.log_every == 0 or step == args.steps:
            full_loss = model.loss_and_grads(data)[0]
            accuracy = accuracy_of(model, data)
            print("step %d loss %.4f" % (step, full_loss), flush=True)
            log_metrics(step, loss=full_loss, accuracy=accuracy)
            if args.pause > 0:
                time.sleep(args.pause)

    print("final loss %.4f accuracy %.3f (%.1f s)"
          % (full_loss, accuracy, time.monotonic() - start), flush=True)
    path = save_checkpoint(model, args.steps, full_loss, accuracy)
    print("checkpoint written to %s" % path, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
