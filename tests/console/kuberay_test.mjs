// The console against the kuberay fleet on kubesim (the API-server simulator with the KubeRay
// operator, scheduler and kubelet) and s3rver, set up as scripts/e2e/kuberay_loop does: a job
// whose image does not exist shows ImagePullFailed at the top and the kubelet's and scheduler's
// events in the event view; the capacity page shows the cordoned h200 node as blocked, with the
// same numbers as GET /api/v1/capacity.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { BUILD, launchChromium, screenshot, signedIn, startForge, startPeer } from "./lib.mjs";

const NODES = `- metadata: {name: h200-a, labels: {starforge/gpu-series: h200}}
  status:
    capacity: {cpu: "96", memory: 1Ti, nvidia.com/gpu: "8"}
    allocatable: {cpu: "95", memory: 1000Gi, nvidia.com/gpu: "8"}
- metadata: {name: h200-b, labels: {starforge/gpu-series: h200}}
  status:
    capacity: {cpu: "96", memory: 1Ti, nvidia.com/gpu: "8"}
    allocatable: {cpu: "95", memory: 1000Gi, nvidia.com/gpu: "8"}
- metadata: {name: h200-c, labels: {starforge/gpu-series: h200}}
  spec: {unschedulable: true}
  status:
    capacity: {cpu: "96", memory: 1Ti, nvidia.com/gpu: "8"}
    allocatable: {cpu: "95", memory: 1000Gi, nvidia.com/gpu: "8"}
- metadata: {name: h100-a, labels: {starforge/gpu-series: h100}}
  status:
    capacity: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}
    allocatable: {cpu: "63", memory: 500Gi, nvidia.com/gpu: "8"}
`;

async function k8s(url, method, path, body, type = "application/json") {
  const res = await fetch(url + path, { method, headers: { "Content-Type": type }, body: JSON.stringify(body) });
  if (!res.ok && res.status !== 409) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
}

describe("console on the kuberay fleet (kubesim)", () => {
  let work, kubesim, s3, forge, chrome;
  before(async () => {
    work = mkdtempSync(join(tmpdir(), "console-kuberay-"));
    writeFileSync(join(work, "nodes.yaml"), NODES);
    writeFileSync(join(work, "images.yaml"), '- "python:*"\n');
    mkdirSync(join(work, "pv", "starforge", "data"), { recursive: true });
    kubesim = await startPeer(
      "kubesim",
      join(BUILD, "bin", "kubesim"),
      ["--listen", "127.0.0.1:0", "--port-file", join(work, "kubesim.port"), "--nodes", join(work, "nodes.yaml"),
        "--controllers", "all", "--pv-root", join(work, "pv"), "--images", join(work, "images.yaml"), "--kubelet-backoff-ms", "500"],
      join(work, "kubesim.port"),
    );
    await k8s(kubesim.url, "POST", "/api/v1/namespaces", { metadata: { name: "starforge" } });
    await k8s(kubesim.url, "POST", "/api/v1/namespaces/starforge/persistentvolumeclaims", {
      metadata: { name: "data" },
      spec: { accessModes: ["ReadWriteMany"], resources: { requests: { storage: "1Gi" } } },
    });
    await k8s(kubesim.url, "PATCH", "/api/v1/namespaces/starforge/persistentvolumeclaims/data/status", { status: { phase: "Bound" } }, "application/merge-patch+json").catch(() => {});
    s3 = await startPeer("s3peer", "node", ["tools/s3peer/s3peer.js", "--port-file", join(work, "s3.port"), "--bucket", "starforge"], join(work, "s3.port"));
    forge = await startForge({
      FORGE_STORAGE_ROOT: join(work, "pv", "starforge", "data"),
      FORGE_K8S_STORAGE_PVC: "data",
      FORGE_K8S_STORAGE_SHARED: "true",
      FORGE_K8S_API_SERVER: kubesim.url,
      FORGE_K8S_NAMESPACE: "starforge",
      FORGE_KUBERAY_TTL_SECONDS: "60",
      FORGE_S3_ENDPOINT: s3.url,
      FORGE_S3_BUCKET: "starforge",
      FORGE_S3_ACCESS_KEY: "S3RVER",
      FORGE_S3_SECRET_KEY: "S3RVER",
      FORGE_DEFAULT_FLEET_KIND: "kuberay",
    });
    chrome = await launchChromium();
  });
  after(async () => {
    await chrome?.close();
    await forge?.stop();
    await s3?.stop();
    await kubesim?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  test("a missing image shows ImagePullFailed and the Kubernetes events in the event view", async () => {
    const id = forge.submit(
      "alice",
      `name: bad-image
fleet: kuberay
image: registry.invalid/nope:1
entrypoint: python3 main.py
deadlines: {preRunningSeconds: 600}
pools:
  - {name: main, gpuSeries: h100, gpusPerMachine: 1}
`,
      { "main.py": "print('never')\n" },
    );
    const page = await signedIn(chrome.browser, forge.url, forge.tokens.alice);
    await page.goto(`${forge.url}/jobs/${id}`);
    await page.locator("#status-line").getByText(/ImagePullFailed/).waitFor({ timeout: 90_000 });
    assert.match(await page.locator("#status-line").textContent(), /Pending/);
    // The kubelet's pull failure and the scheduler's placement, each with its object.
    const pull = page.locator("#events tbody tr", { hasText: /ErrImagePull|ImagePullBackOff|Failed to pull/ }).first();
    await pull.waitFor({ timeout: 30_000 });
    assert.match(await pull.textContent(), /Pod\//);
    await page.locator("#events tbody tr", { hasText: "Scheduled" }).first().waitFor({ timeout: 30_000 });
    await screenshot(page, "job-image-pull-failed", { fullPage: false }); // the top: line + events
    await page.getByRole("button", { name: "Cancel job…" }).click();
    await page.getByRole("button", { name: "Yes, cancel it" }).click();
    await page.locator("#status-line").getByText("Cancelled").waitFor({ timeout: 90_000 });
    // After the end, the fleet's archive: the events it kept and the RayJob (shown as YAML).
    await page.locator('#archive button[data-file="events.json"]').waitFor({ timeout: 90_000 });
    await page.locator('#archive button[data-file="rayjob.json"]').click();
    await page.locator("#archive-view").getByText("kind: RayJob").waitFor();
    assert.doesNotMatch(await page.locator("#archive-view").textContent(), /X-Amz-Signature/i, "presigned URLs are redacted");
    // The capsule's file list, read from its manifest in S3 (s3rver), as on the local fleet.
    await page.locator("#capsule-files summary").click();
    await page.locator("#capsule-files td", { hasText: "main.py" }).first().waitFor();
    assert.match(await page.locator("#capsule").textContent(), /Files\d+ of yours \+ \d+ of StarForge.s/);
    await page.context().close();
  });

  test("a cordoned node shows its series as blocked, with the API's numbers", async () => {
    const api = JSON.parse((await forge.api("alice", "/api/v1/capacity")).body).fleets.find((f) => f.fleet === "kuberay");
    assert.ok(api && api.series, `kuberay capacity: ${JSON.stringify(api)}`);
    const h200 = api.series.find((s) => s.series === "h200");
    assert.equal(h200.blockedNodes, 1);
    const page = await signedIn(chrome.browser, forge.url, forge.tokens.alice);
    await page.goto(`${forge.url}/capacity`);
    const series = page.locator('[data-series="h200"]');
    await series.waitFor();
    const num = async (k) => Number(await series.locator(`dd[data-k="${k}"]`).textContent());
    assert.equal(await num("blocked nodes"), h200.blockedNodes);
    assert.equal(await num("total"), h200.gpus.capacity);
    assert.equal(await num("allocatable"), h200.gpus.allocatable);
    assert.equal(await num("in use"), h200.gpus.requested);
    assert.equal(await num("free"), h200.gpus.free);
    assert.match(await series.locator('tr[data-node="h200-c"]').textContent(), /blocked: .*cordoned/);
    assert.match(await series.locator('tr[data-node="h200-a"]').textContent(), /schedulable/);
    await screenshot(page, "capacity-kuberay");
    await page.context().close();
  });
});
