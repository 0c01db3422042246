// The console for daily work, in Chromium against `forge serve` on the local fleet:
// training curves drawn from a job's metrics.jsonl (and a TensorBoard event file) and growing
// while tiny-train runs; the job page asking only for the files the server lists (no 404 in the
// browser's console); a new user's empty state leading to a first job from the tiny-train example with no code picked;
// "Run again" from the stored capsule; the JobSpec reference; sortable columns. No console
// error or CSP violation on any page. Screenshots go to BUILD/test-artifacts/console/.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { launchChromium, newContext, screenshot, signedIn, startForge, waitFor } from "./lib.mjs";

const TRAIN_PY = readFileSync("examples/tiny-train/train.py", "utf8");
// tiny-train as the README runs it, slowed down so that a page sees its curves grow: 41 points
// (steps 0, 10, …, 400), half a second apart.
const TINY_TRAIN = `name: tiny-train
fleet: local
image: python:3.11-slim
entrypoint: python3 train.py --steps 400 --log-every 10 --pause 0.5
pools:
  - name: main
    cpusPerMachine: 1
`;

// A TensorBoard event file as its writers frame one, in plain Python: TFRecords (length, masked
// CRC-32C, an Event protobuf, masked CRC-32C). The jobs below import struct and add the protobufs.
const TFRECORD_PY = `def crc32c(data):
    c = 0xFFFFFFFF
    for x in data:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c ^ 0xFFFFFFFF

def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

def record(data):
    n = struct.pack("<Q", len(data))
    return n + struct.pack("<I", masked(n)) + data + struct.pack("<I", masked(data))
`;

// Every console message of type error (a failed request shows as one) and CSP report.
function watchConsole(page) {
  const errors = [];
  page.on("console", (m) => {
    if (m.type() === "error" || /Content Security Policy/i.test(m.text())) errors.push(m.text());
  });
  page.on("pageerror", (e) => errors.push(e.message));
  return errors;
}

// The page's requests for a job's metrics: by its stream (?follow=1) and plain reads.
function watchMetricsRequests(page) {
  const seen = { follows: [], plain: [] };
  page.on("request", (r) => {
    const u = new URL(r.url());
    if (!/^\/api\/v1\/jobs\/[^/]+\/metrics$/.test(u.pathname)) return;
    (u.searchParams.get("follow") === "1" ? seen.follows : seen.plain).push(u.pathname + u.search);
  });
  return seen;
}

// How many points the chart of `series` holds now (0: no chart yet); never waits.
const chartCount = (page, series) =>
  page.evaluate((name) => Number(document.querySelector(`#charts figure[data-series="${name}"]`)?.getAttribute("data-count") ?? 0), series);

describe("the console for daily work", () => {
  let forge;
  let chrome;
  before(async () => {
    forge = await startForge({}, ["alice", "bob", "carol"]);
    chrome = await launchChromium();
  });
  after(async () => {
    await chrome?.close();
    await forge?.stop();
  });

  test("tiny-train's loss and accuracy curves grow while it runs, then stay complete", async () => {
    const id = forge.submit("alice", TINY_TRAIN, { "train.py": TRAIN_PY });
    // The API's stream (?follow=1), read beside the page: points arrive in several events
    // while the job runs, then `end`.
    const followed = (async () => {
      const res = await fetch(`${forge.url}/api/v1/jobs/${id}/metrics?follow=1`, { headers: { Authorization: `Bearer ${forge.tokens.alice}` } });
      assert.equal(res.status, 200);
      assert.match(res.headers.get("content-type"), /^text\/event-stream/);
      const text = await res.text(); // until the server ends the stream
      const events = text.split("\n\n").filter((e) => /^event: /m.test(e));
      return events.map((e) => ({ event: /^event: (.*)$/m.exec(e)[1], data: /^data: (.*)$/m.exec(e)?.[1] }));
    })();
    const page = await signedIn(chrome.browser, forge.url, forge.tokens.alice);
    const errors = watchConsole(page);
    const metricsReads = watchMetricsRequests(page);
    await page.goto(`${forge.url}/jobs/${id}`);
    // While it runs: its use is recorded at the end; the curves are live.
    await page.locator("#usage-note").getByText("CPU time and peak memory are recorded when the entrypoint ends.").waitFor();
    // A first chart while the job still runs, with fewer than all of its points.
    const first = await waitFor("a loss curve while tiny-train runs", async () => {
      const n = await chartCount(page, "loss");
      return n > 0 && n;
    }, 120);
    const phase = JSON.parse((await forge.api("alice", `/api/v1/jobs/${id}`)).body).phase;
    assert.ok(first < 41, `the first curve drawn had ${first} points: it should have grown to 41 (phase ${phase})`);
    await page.locator("#metrics-note").getByText("Live: drawn as the job writes them.").waitFor();
    // It grows without a reload, to every point, and the job's end makes it final.
    await waitFor("the loss curve to reach 41 points", async () => (await chartCount(page, "loss")) === 41, 180);
    assert.equal(await chartCount(page, "accuracy"), 41);
    await page.locator("#status-line").getByText("Succeeded").waitFor({ timeout: 60_000 });
    await page.locator("#metrics-note").getByText("Final.").waitFor({ timeout: 30_000 });
    // The page followed the API's metrics stream: one follow, no read by polling.
    assert.deepEqual(metricsReads.plain, [], "the metrics were polled, not followed");
    assert.ok(metricsReads.follows.length >= 1);
    // How long each phase took, and the whole, in words; what the job used, as the API says.
    const done = JSON.parse((await forge.api("alice", `/api/v1/jobs/${id}`)).body);
    await waitFor("the durations to end with the total", async () => /Total/.test(await page.locator("#durations").textContent()));
    const took = await page.locator("#durations dt").allTextContents();
    assert.deepEqual(took.at(-1), "Total");
    assert.ok(took.includes("Running") && took.includes("Queued"), `durations of ${took}`);
    for (const v of await page.locator("#durations dd").allTextContents()) assert.match(v, /^(\d+ ms|\d+\.\ds|\d+s|\d+m(\d+s)?)$/);
    const seconds = (v) => (/ ms$/.test(v) ? Number.parseFloat(v) / 1000 : /m/.test(v) ? Number(/^(\d+)m/.exec(v)[1]) * 60 + Number(/(\d+)s$/.exec(v)?.[1] ?? 0) : Number.parseFloat(v));
    const running = seconds(await page.locator("#durations dt", { hasText: "Running" }).locator("xpath=following-sibling::dd[1]").textContent());
    assert.ok(running >= 15, `tiny-train pauses 0.5 s at each of 40 steps, but Running took ${running} s`);
    const usage = done.resources.usage;
    assert.ok(usage.cpuSeconds > 0 && usage.maxRssBytes > 1 << 20, JSON.stringify(done.resources));
    await page.locator("#usage").getByText(`${usage.cpuSeconds.toFixed(1)} s`).waitFor();
    assert.match(await page.locator("#usage").textContent(), /Peak memory\d+(\.\d)? MiB/);
    assert.equal(await page.locator("#pod-requests").count(), 0, "no pods on the local fleet");
    // The drawn line has its points, and the caption the last value.
    const drawn = await page.locator('#charts figure[data-series="loss"] polyline').getAttribute("data-points");
    assert.equal(drawn, "41");
    assert.match(await page.locator('#charts figure[data-series="loss"] figcaption').textContent(), /^loss 0\.0\d+ at step 400$/);
    // The API's answer is the same series; from the final offset there is nothing more.
    const m = JSON.parse((await forge.api("alice", `/api/v1/jobs/${id}/metrics`)).body);
    assert.deepEqual(m.series.map((s) => s.name), ["loss", "accuracy"]);
    assert.equal(m.series[0].points.length, 41);
    assert.deepEqual(m.series[0].points[40].slice(0, 1), [400]);
    assert.ok(m.series[0].points[40][1] < m.series[0].points[0][1] / 5, "the loss falls");
    assert.equal(m.complete, true);
    const rest = JSON.parse((await forge.api("alice", `/api/v1/jobs/${id}/metrics?offset=${m.offset}`)).body);
    assert.deepEqual(rest.series, []);
    const streamed = await followed;
    assert.equal(streamed.at(-1).event, "end");
    const batches = streamed.filter((e) => e.event === "metrics").map((e) => JSON.parse(e.data));
    assert.ok(batches.length >= 2, `the stream sent ${batches.length} metrics event(s): the points should arrive as they are written`);
    assert.equal(batches.flatMap((b) => b.series.find((s) => s.name === "loss")?.points ?? []).length, 41);
    // Another user's job's metrics are not found, like the job.
    assert.equal((await forge.api("bob", `/api/v1/jobs/${id}/metrics`)).status, 404);
    // The archive shows the local fleet's runner.log, and nothing was asked for that the
    // server does not list (a 404 would be a console error).
    await page.locator('#archive button[data-file="runner.log"]').waitFor({ timeout: 30_000 });
    assert.equal(await page.locator("#archive button").count(), 1);
    await page.locator("#h-metrics").scrollIntoViewIfNeeded();
    await screenshot(page, "job-curves");
    assert.deepEqual(errors, []);
    await page.context().close();
  });

  test("a job without metrics says how to report them; bad lines are counted, not drawn", async () => {
    const id = forge.submit(
      "alice",
      `name: few-metrics
fleet: local
image: python:3.11-slim
entrypoint: python3 m.py
pools:
  - name: main
`,
      {
        "m.py": `import json, os, struct
with open(os.path.join(os.environ["FORGE_JOB_DIR"], "metrics.jsonl"), "w") as f:
    f.write('{"step": 1, "reward": 2.5}\\nnot json\\n{"step": 2, "reward": 3}\\n')

# A TensorBoard event file as its writers frame one, in plain Python: TFRecords (length, masked
# CRC-32C, an Event protobuf, masked CRC-32C) of scalars (Summary.Value.simple_value).
${TFRECORD_PY}
def scalar(step, tag, value):
    t = tag.encode()
    v = b"\\x0a" + bytes([len(t)]) + t + b"\\x15" + struct.pack("<f", value)
    s = b"\\x0a" + bytes([len(v)]) + v
    return b"\\x10" + bytes([step]) + b"\\x2a" + bytes([len(s)]) + s

os.makedirs(os.path.join(os.environ["FORGE_JOB_DIR"], "tb"))
with open(os.path.join(os.environ["FORGE_JOB_DIR"], "tb", "events.out.tfevents.1.host"), "wb") as f:
    for step in range(3):
        f.write(record(scalar(step, "tb/score", 0.5 * step)))
print("done")
`,
      },
    );
    const quiet = forge.submit(
      "alice",
      `name: no-metrics
fleet: local
image: python:3.11-slim
entrypoint: python3 q.py
pools:
  - name: main
`,
      { "q.py": "print('quiet')\n" },
    );
    const page = await signedIn(chrome.browser, forge.url, forge.tokens.alice);
    const errors = watchConsole(page);
    await page.goto(`${forge.url}/jobs/${id}`);
    await page.locator("#metrics-note").getByText("Final.").waitFor({ timeout: 120_000 });
    assert.equal(await chartCount(page, "reward"), 2);
    // The TensorBoard event file's scalars, drawn beside metrics.jsonl's.
    assert.equal(await chartCount(page, "tb/score"), 3);
    assert.match(await page.locator("#metrics-note").textContent(), /Also from TensorBoard event files: tb\/events\.out\.tfevents\.1\.host\./);
    assert.match(await page.locator("#metrics-note").textContent(), /1 line\(s\) of metrics\.jsonl were not a JSON object of numbers/);
    await page.goto(`${forge.url}/jobs/${quiet}`);
    await page.locator("#metrics-note").getByText("This job wrote no metrics.").waitFor({ timeout: 120_000 });
    assert.equal(await page.locator("#charts figure").count(), 0);
    await page.locator(".howto summary").click();
    await page.locator(".howto").getByText("metrics.log(step, loss=loss, accuracy=accuracy)").waitFor();
    assert.deepEqual(errors, []);
    await page.context().close();
  });

  test("TensorBoard scalars of a job that writes event files as it runs: charts that grow over the metrics stream", async () => {
    // A trainer as tensorboardX or PyTorch's SummaryWriter writes: runs/<run>/events.out.tfevents.*,
    // a file_version event first, then scalar summaries with their wall time and step, flushed as
    // it goes. Plain Python: TFRecords (length, masked CRC-32C, the Event protobuf, masked CRC-32C).
    const id = forge.submit(
      "bob",
      `name: tb-train
fleet: local
image: python:3.11-slim
entrypoint: python3 tb.py
pools:
  - name: main
`,
      {
        "tb.py": `import os, struct, time

${TFRECORD_PY}
def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])

def field(number, payload):  # a length-delimited field
    return varint(number << 3 | 2) + varint(len(payload)) + payload

def event(step, values):  # Event{wall_time, step, summary{value{tag, simple_value}...}}
    summary = b"".join(field(1, field(1, tag.encode()) + b"\x15" + struct.pack("<f", v)) for tag, v in values)
    return b"\x09" + struct.pack("<d", time.time()) + b"\x10" + varint(step) + field(5, summary)

run = os.path.join(os.environ["FORGE_JOB_DIR"], "runs", "tb-train")
os.makedirs(run)
with open(os.path.join(run, "events.out.tfevents.1765000000.host.1.0"), "wb") as f:
    f.write(record(b"\x09" + struct.pack("<d", time.time()) + field(3, b"brain.Event:2")))
    for i in range(30):
        step = 100 * i
        f.write(record(event(step, [("train/loss", 2.0 / (i + 1)), ("train/lr", 0.001)])))
        f.flush()
        print("step", step, flush=True)
        time.sleep(0.5)
`,
      },
    );
    const page = await signedIn(chrome.browser, forge.url, forge.tokens.bob);
    const errors = watchConsole(page);
    const metricsReads = watchMetricsRequests(page);
    await page.goto(`${forge.url}/jobs/${id}`);
    // Drawn while the job runs, with fewer points than it ends with, then growing without a reload.
    const first = await waitFor("a train/loss chart while tb-train runs", async () => {
      const n = await chartCount(page, "train/loss");
      return n > 0 && n;
    }, 120);
    assert.ok(first < 30, `the first chart drawn had ${first} points: it should have grown to 30`);
    assert.match(await page.locator("#metrics-note").textContent(), /Also from TensorBoard event files: runs\/tb-train\/events\.out\.tfevents\.1765000000\.host\.1\.0\./);
    await waitFor("train/loss to reach 30 points", async () => (await chartCount(page, "train/loss")) === 30, 120);
    await page.locator("#metrics-note").getByText("Final.").waitFor({ timeout: 60_000 });
    assert.equal(await chartCount(page, "train/lr"), 30);
    // The values the job wrote (float32): the caption says the last, the API has every point.
    assert.match(await page.locator('#charts figure[data-series="train/loss"] figcaption').textContent(), /^train\/loss 0\.06667 at step 2900$/);
    const m = JSON.parse((await forge.api("bob", `/api/v1/jobs/${id}/metrics`)).body);
    const loss = m.series.find((x) => x.name === "train/loss");
    assert.deepEqual(loss.points.map((p) => p[0]), Array.from({ length: 30 }, (_, i) => 100 * i));
    for (const [i, [, v]] of loss.points.entries()) assert.ok(Math.abs(v - 2 / (i + 1)) < 1e-6, `point ${i}: ${v}`);
    assert.deepEqual(m.eventFiles.map((f) => f.path), ["runs/tb-train/events.out.tfevents.1765000000.host.1.0"]);
    // Over the stream: no plain read of the metrics.
    assert.deepEqual(metricsReads.plain, [], "the metrics were polled, not followed");
    assert.ok(metricsReads.follows.length >= 1);
    await page.locator("#h-metrics").scrollIntoViewIfNeeded();
    await screenshot(page, "job-tensorboard", { fullPage: false });
    assert.deepEqual(errors, []);
    await page.context().close();

    // Where the stream is refused (an older server, a proxy that buffers): read by cursor
    // every 2 s, to the same charts.
    const context = await newContext(chrome.browser);
    await context.route(/\/api\/v1\/jobs\/[^/]+\/metrics\?(.*&)?follow=1/, (r) =>
      r.fulfill({ status: 400, contentType: "application/json", body: '{"error":"BadRequest","message":"unknown query parameter \\"follow\\""}' }),
    );
    const p2 = await context.newPage();
    const reads2 = watchMetricsRequests(p2);
    await p2.goto(`${forge.url}/jobs`);
    await p2.getByLabel("API token").fill(forge.tokens.bob);
    await p2.getByRole("button", { name: "Sign in" }).click();
    await p2.getByRole("button", { name: "Sign out" }).waitFor();
    await p2.goto(`${forge.url}/jobs/${id}`);
    await p2.locator("#metrics-note").getByText("Final.").waitFor({ timeout: 60_000 });
    assert.equal(await chartCount(p2, "train/loss"), 30);
    assert.ok(reads2.plain.length >= 1 && reads2.follows.length >= 1, JSON.stringify(reads2));
    await context.close();
  });

  test("a new user is shown how to start, runs tiny-train from the example, runs it again without code", async () => {
    const page = await signedIn(chrome.browser, forge.url, forge.tokens.carol);
    const errors = watchConsole(page);
    // No jobs: not an empty table, but what to do.
    await page.locator("#jobs-empty").getByText("You have no jobs yet.").waitFor();
    assert.equal(await page.locator("#jobs-scroll").isVisible(), false);
    await screenshot(page, "jobs-empty");
    await page.getByRole("link", { name: "tiny-train example" }).click();
    await page.waitForURL(/\/submit\?example=tiny-train$/);
    await page.locator("#code-info").getByText(/^The example's code: train\.py/).waitFor();
    assert.match(await page.getByLabel("JobSpec (YAML or JSON)").inputValue(), /^name: tiny-train$/m);
    await screenshot(page, "submit-example");
    // The JobSpec reference is linked, and served by the console itself.
    await page.getByRole("link", { name: "the JobSpec reference" }).click();
    await page.locator("#jobspec-reference").getByText(/resumeFrom/).first().waitFor();
    assert.match(await page.locator("#jobspec-reference").textContent(), /gpusPerMachine/);
    await page.goBack();
    await page.waitForURL(/\/submit/);
    await page.locator("#code-info").getByText(/^The example's code: train\.py/).waitFor();
    await page.getByRole("button", { name: "Submit", exact: true }).click();
    await page.waitForURL(/\/jobs\/j-/);
    const first = page.url().split("/jobs/")[1];
    await page.locator("#status-line").getByText("Succeeded").waitFor({ timeout: 120_000 });
    await waitFor("tiny-train's 21 points", async () => (await chartCount(page, "loss")) === 21, 60);
    const job1 = JSON.parse((await forge.api("carol", `/api/v1/jobs/${first}`)).body);

    // Run again: the same JobSpec and the stored capsule, nothing uploaded. (Chromium does not
    // show a test a FormData body: the page's fetch is wrapped to note the parts it sends.)
    await page.evaluate(() => {
      const f = window.fetch;
      window.sentParts = [];
      window.fetch = (url, init) => {
        if (init?.body instanceof FormData) window.sentParts.push([...init.body.keys()]);
        return f(url, init);
      };
    });
    await page.getByRole("button", { name: "Run again" }).click();
    await page.waitForURL((u) => /\/jobs\/j-/.test(u.pathname) && !u.pathname.endsWith(first));
    const second = page.url().split("/jobs/")[1];
    await page.locator("#status-line").getByText("Succeeded").waitFor({ timeout: 120_000 });
    const job2 = JSON.parse((await forge.api("carol", `/api/v1/jobs/${second}`)).body);
    assert.equal(job2.capsule.sha256, job1.capsule.sha256, "the same capsule ran again");
    assert.deepEqual(await page.evaluate(() => window.sentParts), [["spec", "capsuleSha256"]]);

    // Edit and run: the stored capsule is offered; with the JobSpec unchanged it runs, with a
    // changed one the page says why the code is needed again.
    await page.getByRole("button", { name: "Edit and run…" }).click();
    await page.getByRole("heading", { name: "Run again" }).waitFor();
    assert.equal(await page.locator("#reuse-capsule").isChecked(), true);
    const spec = await page.getByLabel("JobSpec (YAML or JSON)").inputValue();
    await page.getByLabel("JobSpec (YAML or JSON)").fill(spec.replace("name: tiny-train", "name: tiny-train-2"));
    await page.getByRole("button", { name: "Submit", exact: true }).click();
    await page.locator("#spec-errors").getByText(/runs again only with that JobSpec unchanged/).waitFor();
    await page.getByLabel("JobSpec (YAML or JSON)").fill(spec);
    await page.getByRole("button", { name: "Submit", exact: true }).click();
    await page.waitForURL((u) => /\/jobs\/j-/.test(u.pathname) && !u.pathname.endsWith(first) && !u.pathname.endsWith(second));
    await page.locator("#status-line").getByText(/Succeeded|Running|Pending|Queued|Packaging|Submitting/).waitFor();
    // The 409 of the edited JobSpec is the only failed request, and it was answered on purpose.
    assert.deepEqual(errors.filter((e) => !/409/.test(e)), []);
    await page.context().close();
  });

  test("the jobs table sorts by a column (kept in the URL) and says when filters match nothing", async () => {
    const page = await signedIn(chrome.browser, forge.url, forge.tokens.alice);
    const errors = watchConsole(page);
    await page.locator("#jobs-status").getByText("All 3 jobs.").waitFor();
    const names = () => page.locator("tbody tr[data-job] td:first-child").allTextContents();
    assert.deepEqual(await names(), ["no-metrics", "few-metrics", "tiny-train"], "newest first");
    await page.getByRole("button", { name: "Name", exact: true }).click();
    assert.deepEqual(await names(), ["few-metrics", "no-metrics", "tiny-train"]);
    assert.equal(await page.locator('th[data-col="name"]').getAttribute("aria-sort"), "ascending");
    assert.match(page.url(), /[?&]sort=name$/);
    await page.getByRole("button", { name: "Name", exact: true }).click();
    assert.deepEqual(await names(), ["tiny-train", "no-metrics", "few-metrics"]);
    assert.match(page.url(), /[?&]sort=-name$/);
    // Kept across a reload.
    await page.reload();
    await page.locator("#jobs-status").getByText("All 3 jobs.").waitFor();
    assert.deepEqual(await names(), ["tiny-train", "no-metrics", "few-metrics"]);
    assert.equal(await page.locator('th[data-col="name"]').getAttribute("aria-sort"), "descending");
    // Longest run first.
    await page.getByRole("button", { name: "Ran", exact: true }).click();
    assert.equal((await names())[0], "tiny-train");
    // A part of the name, in any case, finds every job that contains it.
    await page.getByLabel("Name", { exact: true }).fill("METRICS");
    await page.getByLabel("Name", { exact: true }).press("Enter");
    await page.locator("#jobs-status").getByText("All 2 jobs.").waitFor();
    assert.deepEqual((await names()).sort(), ["few-metrics", "no-metrics"]);
    // Filters that match nothing: said, with a way back.
    await page.getByLabel("Name", { exact: true }).fill("nothing-is-called-this");
    await page.getByLabel("Name", { exact: true }).press("Enter");
    await page.locator("#jobs-empty").getByText(/No jobs match these filters/).waitFor();
    await page.getByRole("button", { name: "Clear the filters" }).click();
    await page.locator("#jobs-status").getByText("All 3 jobs.").waitFor();
    assert.equal(await page.locator("#jobs-empty").isVisible(), false);
    assert.deepEqual(errors, []);
    await page.context().close();
  });

  test("rough edges: a failed job's error in its headline, labelled durations in UTC, no GPU bar without GPUs, phone width", async () => {
    const id = forge.submit(
      "bob",
      `name: will-fail
fleet: local
image: python:3.11-slim
entrypoint: python3 fail.py
pools:
  - name: main
`,
      { "fail.py": 'print("starting")\ndef train(lr):\n    raise ValueError(f"bad learning rate {lr}")\ntrain(-1)\n' },
    );
    const page = await signedIn(chrome.browser, forge.url, forge.tokens.bob);
    const errors = watchConsole(page);
    await page.goto(`${forge.url}/jobs/${id}`);
    await page.locator("#status-line").getByText("Failed").waitFor({ timeout: 120_000 });
    await page.locator("#failure").getByText("ValueError: bad learning rate -1").waitFor({ timeout: 30_000 });
    // The controller's and the fleet's AppFailed are one row, naming both.
    const failed = page.locator("#events tbody tr", { hasText: "AppFailed" });
    await waitFor("one AppFailed row naming both sources", async () => (await failed.count()) === 1 && /controller, fleet:local|fleet:local, controller/.test(await failed.textContent()));
    // Each phase's bar says how long it took; every time is UTC, in one format.
    await page.locator("#timeline .seg").first().waitFor();
    for (const label of await page.locator("#timeline .seg span").allTextContents()) assert.match(label, /^[A-Z][a-z]+ \d+[smhd]/);
    for (const t of await page.locator(".transitions time").allTextContents()) assert.match(t, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
    assert.match(await page.locator("#facts").textContent(), /Created\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/);
    assert.match(await page.locator("#facts").textContent(), /Took\d+s/);
    await screenshot(page, "job-failed");
    // The capacity page draws a GPU bar only for a machine that has GPUs.
    const cap = JSON.parse((await forge.api("bob", "/api/v1/capacity")).body);
    const local = cap.fleets.find((f) => f.fleet === "local");
    await page.getByRole("link", { name: "Capacity" }).click();
    await page.locator('[data-fleet="local"]').waitFor();
    if (local.gpus === 0) {
      await page.locator("#local-no-gpus").waitFor();
      assert.doesNotMatch(await page.locator('[data-fleet="local"]').textContent(), /GPUs 0 \/ 0/);
    } else {
      assert.equal(await page.locator("#local-no-gpus").count(), 0);
    }
    // At phone width the jobs table shows name, phase and age, and needs no sideways scroll.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.getByRole("link", { name: "Jobs", exact: true }).first().click();
    await page.locator(`tr[data-job="${id}"]`).waitFor();
    assert.equal(await page.locator(`tr[data-job="${id}"] td.c-id`).isVisible(), false);
    assert.equal(await page.locator(`tr[data-job="${id}"] .phase`).textContent(), "Failed");
    assert.equal(await page.locator(`tr[data-job="${id}"] .phase`).isVisible(), true);
    assert.equal(await page.locator(`tr[data-job="${id}"]`).getByText("will-fail").isVisible(), true);
    const overflow = await page.locator("#jobs-scroll").evaluate((e) => e.scrollWidth - e.clientWidth);
    assert.ok(overflow <= 1, `the table is ${overflow} px wider than the phone`);
    await screenshot(page, "jobs-phone", { fullPage: false });
    assert.deepEqual(errors, []);
    await page.context().close();
  });

  test("playgrounds: no start form where no fleet can run one, but what to configure; where one can, the form offers only it", async () => {
    const page = await signedIn(chrome.browser, forge.url, forge.tokens.bob);
    const errors = watchConsole(page);
    await page.getByRole("link", { name: "Playgrounds" }).click();
    // No vLLM on this machine and no kuberay fleet: no form, but each fleet's need.
    await page.locator("#pg-unavailable").getByText("No fleet here can run a playground").waitFor();
    await page.locator("#playgrounds").getByText("No playgrounds.", { exact: true }).waitFor();
    assert.equal(await page.locator("form.pg-start").isVisible(), false);
    assert.match(await page.locator('#pg-unavailable li[data-fleet="local"]').textContent(), /FORGE_LOCAL_VLLM_COMMAND/);
    assert.match(await page.locator('#pg-unavailable li[data-fleet="kuberay"]').textContent(), /FORGE_K8S_API_SERVER/);
    // Each need links what to do, on a page forge serves itself (not a path to a file).
    await page.locator('#pg-unavailable li[data-fleet="local"]').getByRole("link", { name: "How to set up playgrounds on the local fleet" }).click();
    await page.waitForURL(/\/help\/local-playgrounds$/);
    await page.getByRole("heading", { name: "Playgrounds on the local fleet" }).waitFor();
    assert.match(await page.locator("#local-playgrounds-help").textContent(), /FORGE_LOCAL_VLLM_COMMAND[\s\S]*bubblewrap/);
    await page.goBack();
    await page.locator('#pg-unavailable li[data-fleet="kuberay"]').getByRole("link", { name: "How to set up the kuberay fleet" }).click();
    await page.waitForURL(/\/help\/kuberay-fleet$/);
    await page.getByRole("heading", { name: "Setting up the kuberay fleet" }).waitFor();
    const kuberayHelp = await page.locator("#kuberay-fleet-help").textContent();
    for (const setting of ["FORGE_K8S_API_SERVER", "FORGE_S3_ENDPOINT", "FORGE_S3_BUCKET", "FORGE_K8S_STORAGE_PVC"]) assert.match(kuberayHelp, new RegExp(setting));
    await screenshot(page, "help-kuberay-fleet", { fullPage: false });
    // The capacity page's card of a fleet that is not configured links the same page.
    await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Capacity" }).click();
    await page.locator('[data-fleet="kuberay"]').getByRole("link", { name: "How to set up the kuberay fleet" }).click();
    await page.waitForURL(/\/help\/kuberay-fleet$/);
    await page.locator("#kuberay-fleet-help").getByText(/FORGE_S3_ENDPOINT/).first().waitFor();
    // No help page by another name.
    await page.goto(`${forge.url}/help/constructor`);
    await page.getByRole("heading", { name: "Not found" }).waitFor();
    assert.deepEqual(errors, []);
    await page.context().close();

    // A server whose local fleet can (a vLLM command on its PATH): the form, with that fleet only.
    const other = await startForge({ FORGE_LOCAL_VLLM_COMMAND: "/bin/true" }, ["dave"]);
    try {
      const p2 = await signedIn(chrome.browser, other.url, other.tokens.dave);
      const errors2 = watchConsole(p2);
      await p2.getByRole("link", { name: "Playgrounds" }).click();
      await p2.getByRole("heading", { name: "Start a playground" }).waitFor();
      await p2.locator("#playgrounds").getByText("No playgrounds yet: start one below.").waitFor();
      const fleets = await p2.locator("#pg-fleet option").evaluateAll((os) => os.map((o) => o.value));
      assert.deepEqual(fleets, ["", "local"]);
      assert.equal(await p2.locator("#pg-unavailable").isVisible(), false);
      // A refusal still shows at its field: no model named.
      await p2.getByRole("button", { name: "Start playground" }).click();
      await p2.locator("#pg-errors").getByText(/model: name a model/).waitFor();
      assert.deepEqual(errors2, []);
      await p2.context().close();
    } finally {
      await other.stop();
    }
  });

  test("a JobSpec whose entrypoint needs no files runs without a folder picked", async () => {
    const page = await signedIn(chrome.browser, forge.url, forge.tokens.bob);
    const errors = watchConsole(page);
    await page.getByRole("link", { name: "Submit", exact: true }).click();
    await page.locator("#code-info").getByText(/^No code chosen: the JobSpec alone is sent/).waitFor();
    await page.getByLabel("JobSpec (YAML or JSON)").fill(`name: no-code
fleet: local
image: python:3.11-slim
entrypoint: [python3, -c, "print('no code needed')"]
pools:
  - name: main
`);
    await page.getByRole("button", { name: "Submit", exact: true }).click();
    await page.waitForURL(/\/jobs\/j-/);
    await page.locator("#status-line").getByText("Succeeded").waitFor({ timeout: 120_000 });
    await page.locator("#log").getByText("no code needed").waitFor({ timeout: 30_000 });
    assert.deepEqual(errors, []);
    await page.context().close();
  });
});
