"""Every answer of a real `forge serve` validates against src/api/openapi.json.

ctest api.openapi_responses: pytest from build/tools/sdk-venv (scripts/bootstrap) with
STARFORGE_FORGE_BIN. A server of its own (local fleet, a port the kernel picks, temporary
storage root and state directory, the vLLM emulator as FORGE_LOCAL_VLLM_COMMAND) is driven
through every route — successes and errors — then a second one with the kuberay fleet on a
kubesim and an s3rver of its own (capacity, a job's archive, the doctor, a playground's pod), and
each answer is checked by
tests/support/openapi_check.py: an undeclared status, a field the schema does not declare, a
missing required field, a wrong type or a property the schema declares that no answer carries
(less the few below, which only another fleet sends) fails.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from forge_serve import ForgeServe, wait_for
from openapi_check import Checker

FORGE = os.environ.get("STARFORGE_FORGE_BIN", "")
# Declared properties no answer of this test can carry, and why.
NOT_REACHABLE = {
    "Artifacts.warning": "only a kuberay job on a server without FORGE_K8S_STORAGE_PVC",
    "GET /api/v1/jobs/{id}/metrics → 200.warning": "only a metrics file past a read limit",
}
WAIT = 240  # seconds: an ASan build beside a CPU burner


def code_zip(files):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return buf.getvalue()


JOB = """name: {name}
fleet: local
image: python:3.11
entrypoint: python3 main.py {arg}
pools: [{{name: main}}]
"""
MAIN = """import os, sys, time
d = os.environ["FORGE_JOB_DIR"]
os.makedirs(os.path.join(d, "ckpt"), exist_ok=True)
open(os.path.join(d, "ckpt", "model.bin"), "w").write("weights")
with open(os.path.join(d, "metrics.jsonl"), "w") as m:
    m.write('{"step": 1, "loss": 0.5, "accuracy": 0.7}\\n{"loss": 0.25}\\nnot json\\n')
for i in range(3):
    print("step", i, flush=True)
if len(sys.argv) > 1:
    time.sleep(float(sys.argv[1]))
"""


def sse(c, path, params, first_only=False):
    """[(event, JSON data)] of a stream until it closes (or its first event)."""
    out, event, data = [], "", []
    with c.stream("GET", path, params=params, timeout=WAIT) as s:
        assert s.status_code == 200 and s.headers["content-type"].startswith("text/event-stream")
        for line in s.iter_lines():
            if line.startswith("event: "):
                event = line[len("event: "):]
            elif line.startswith("data: "):
                data.append(line[len("data: "):])
            elif line == "" and data:
                if event != "log":
                    out.append((event, json.loads("\n".join(data))))
                event, data = "", []
                if first_only and out:
                    break
    return out


@pytest.fixture(scope="module")
def serve():
    if not FORGE:
        pytest.fail("STARFORGE_FORGE_BIN is not set (run through ctest)")
    s = ForgeServe(FORGE, vllm=True)
    s.start(alice=False)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def checker():
    return Checker()


@pytest.fixture(scope="module")
def serve_kuberay():
    if not FORGE:
        pytest.fail("STARFORGE_FORGE_BIN is not set (run through ctest)")
    s = ForgeServe(FORGE, kuberay=True)
    s.start(alice=False)
    yield s
    s.stop()


# Declared properties only the kuberay server's answers carry (its test's verdict wants them).
KUBERAY_ONLY = {
    "JobDetail.resources.pods": "the pods a RayJob requests: a kuberay job's",
}


def verdict(checker, also=None):
    assert not checker.problems, "answers that do not match openapi.json:\n" + "\n".join(
        dict.fromkeys(checker.problems))
    unseen = checker.unseen({**NOT_REACHABLE, **(also or {})})
    assert not unseen, "declared in openapi.json but in no answer: " + ", ".join(unseen)


def test_every_answer_matches_the_schema(serve, checker):
    hooks = {"response": [checker.hook]}

    def client(token=None):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=serve.url, headers=headers, event_hooks=hooks, timeout=60)

    admin, alice, anon = client(serve.admin_token), client(serve.alice), client()
    bad = client("sf_" + "0" * 40)

    def job_state(c, jid, phases):
        def look():
            j = c.get(f"/api/v1/jobs/{jid}").json()
            return j if j["phase"] in phases else None

        return wait_for(f"job {jid} in {phases}", look, WAIT, every=0.3)

    # -- health, the document, authentication -------------------------------------------
    for path in ("/healthz", "/readyz", "/metrics", "/api/v1/openapi.json"):
        assert anon.get(path).status_code == 200
    assert anon.get("/api/v1/jobs").status_code == 401
    assert bad.get("/api/v1/whoami").status_code == 401
    assert admin.get("/api/v1/whoami").json() == {"user": "admin", "admin": True}
    assert alice.get("/api/v1/whoami").status_code == 200

    # -- unknown things ------------------------------------------------------------------
    assert admin.get("/api/v1/nope").status_code == 404
    assert admin.delete("/api/v1/jobs").status_code == 405
    assert admin.get("/api/v1/jobs", params={"bogus": "1"}).status_code == 400
    assert admin.get("/api/v1/jobs", params={"limit": "0"}).status_code == 400
    assert admin.get("/api/v1/jobs", params={"watch": "1", "phase": "Running"}).status_code == 400
    for suffix in ("", "/events", "/logs", "/artifacts", "/capsule"):
        assert admin.get(f"/api/v1/jobs/j-0000000000{suffix}").status_code == 404
    assert admin.post("/api/v1/jobs/j-0000000000/cancel").status_code == 404

    # -- submitting: refusals ------------------------------------------------------------
    good_code = code_zip({"main.py": MAIN})
    assert admin.post("/api/v1/jobs", content=b"x", headers={"Content-Type": "text/plain"}).status_code == 400
    assert admin.post("/api/v1/jobs", files={"code": ("c.zip", good_code)}).status_code == 400
    r = admin.post(
        "/api/v1/jobs",
        files={
            "spec": ("j.yaml", "name: Bad_Name\nentrypoint: x\nimag: y\npools: [{name: main, gpusPerMachine: -1}]\n"),
            "code": ("c.zip", good_code, "application/zip"),
        },
    )
    assert r.status_code == 422 and len(r.json().get("errors", [])) >= 2, r.text
    two = JOB.format(name="two", arg="").replace("{name: main}", "{name: main, machines: 2}")
    r = admin.post("/api/v1/jobs", files={"spec": ("j.yaml", two), "code": ("c.zip", good_code)})
    assert r.status_code == 422 and r.json()["error"] == "Rejected", r.text
    r = admin.post("/api/v1/jobs", files={"spec": ("j.yaml", JOB.format(name="nocode", arg=""))})
    assert r.status_code == 422, r.text
    r = admin.post(
        "/api/v1/jobs",
        files={"spec": ("j.yaml", JOB.format(name="evil", arg="")),
               "code": ("c.zip", code_zip({"../evil.py": "x"}), "application/zip")},
    )
    assert r.status_code == 422 and r.json().get("field") == "code", r.text

    # -- a job to its end -----------------------------------------------------------------
    r = alice.post(
        "/api/v1/jobs",
        files={"spec": ("j.yaml", JOB.format(name="ok", arg="")),
               "code": ("c.zip", good_code, "application/zip")},
    )
    assert r.status_code == 201, r.text
    jid = r.json()["id"]
    assert r.json()["phase"] == "Queued" and r.json()["spec"]["name"] == "ok"
    assert admin.get("/api/v1/jobs", params={"owner": "alice"}).status_code == 200
    assert alice.get(f"/api/v1/jobs/{jid}").status_code == 200
    assert client(serve.token("bob")).get(f"/api/v1/jobs/{jid}").status_code == 404
    job = job_state(alice, jid, {"Succeeded", "Failed"})
    assert job["phase"] == "Succeeded", job
    wait_for("logs archived", lambda: alice.get(f"/api/v1/jobs/{jid}").json()["cleanup"]["logsArchived"], WAIT)
    assert "step 2" in alice.get(f"/api/v1/jobs/{jid}/logs").text
    assert alice.get(f"/api/v1/jobs/{jid}/logs", params={"tail": "1"}).status_code == 200
    assert alice.get(f"/api/v1/jobs/{jid}/logs", params={"file": "nope.log"}).status_code == 404
    assert alice.get(f"/api/v1/jobs/{jid}/logs", params={"file": "../x"}).status_code == 400
    # The streams' JSON events: a followed log's `end`, a job watch's `job`, `events`, `end`.
    end = sse(alice, f"/api/v1/jobs/{jid}/logs", {"follow": "1"})
    assert [e for e, _ in end][-1] == "end"
    checker.check_named("LogEnd", end[-1][1], "logs?follow=1 event: end")
    assert end[-1][1]["phase"] == "Succeeded"
    wait_for("released", lambda: alice.get(f"/api/v1/jobs/{jid}").json()["cleanup"]["released"], WAIT)
    watched = dict(sse(alice, f"/api/v1/jobs/{jid}", {"watch": "1"}))
    assert set(watched) == {"job", "events", "end"}, watched
    checker.check_named("JobDetail", watched["job"], "jobs/{id}?watch=1 event: job")
    checker.check_named("EventList", watched["events"], "jobs/{id}?watch=1 event: events")
    checker.check_named("LogEnd", watched["end"], "jobs/{id}?watch=1 event: end")
    first = sse(alice, "/api/v1/capacity", {"watch": "1"}, first_only=True)
    assert first[0][0] == "capacity"
    checker.check_named("Capacity", first[0][1], "capacity?watch=1 event: capacity")
    assert alice.get(f"/api/v1/jobs/{jid}/events").status_code == 200
    metrics = alice.get(f"/api/v1/jobs/{jid}/metrics").json()
    assert {x["name"] for x in metrics["series"]} == {"loss", "accuracy"}, metrics
    assert metrics["skipped"] == 1 and metrics["complete"], metrics
    assert alice.get(f"/api/v1/jobs/{jid}/metrics", params={"offset": metrics["offset"]}).status_code == 200
    streamed = sse(alice, f"/api/v1/jobs/{jid}/metrics", {"follow": "1"})
    assert [e for e, _ in streamed][-1] == "end", streamed
    for event, data in streamed:
        if event == "metrics":
            checker.check_like("GET", f"/api/v1/jobs/{jid}/metrics", data, "metrics?follow=1 event: metrics")
    arts = alice.get(f"/api/v1/jobs/{jid}/artifacts").json()
    assert any(a["name"] == "driver.log" for a in arts["items"]), arts
    cap = alice.get(f"/api/v1/jobs/{jid}/capsule").json()
    assert cap["userFiles"] == 1
    sha = cap["sha256"]
    assert alice.get(f"/api/v1/capsules/{sha}").status_code == 200
    assert alice.get("/api/v1/capsules/" + "0" * 64).status_code == 404
    assert alice.get("/api/v1/capsules/xyz").status_code in (400, 404)
    assert alice.post(f"/api/v1/jobs/{jid}/cancel").status_code == 200  # ended: unchanged
    # The capsule again, by its digest alone; and a digest the server does not hold.
    r = alice.post("/api/v1/jobs", files={"spec": ("j.yaml", JOB.format(name="ok", arg="")),
                                          "capsuleSha256": (None, sha)})
    assert r.status_code == 201, r.text
    r = alice.post("/api/v1/jobs", files={"spec": ("j.yaml", JOB.format(name="ok", arg="")),
                                          "capsuleSha256": (None, "1" * 64)})
    assert r.status_code == 409, r.text

    # -- a job cancelled while it runs ----------------------------------------------------
    r = alice.post("/api/v1/jobs", files={"spec": ("j.yaml", JOB.format(name="long", arg="600")),
                                          "code": ("c.zip", good_code, "application/zip")})
    assert r.status_code == 201, r.text
    long_id = r.json()["id"]
    job_state(alice, long_id, {"Running"})
    assert alice.get("/api/v1/capacity").status_code == 200
    assert admin.get("/api/v1/capacity").status_code == 200
    r = alice.post(f"/api/v1/jobs/{long_id}/cancel")
    assert r.status_code == 202 and r.json()["cancelRequested"], r.text
    assert job_state(alice, long_id, {"Cancelled", "Failed", "Succeeded"})["phase"] == "Cancelled"
    assert alice.get(f"/api/v1/jobs/{long_id}/events").json()["items"], "no CancelRequested event"
    page = alice.get("/api/v1/jobs", params={"limit": "1"}).json()
    assert page["nextCursor"]
    assert alice.get("/api/v1/jobs", params={"limit": "1", "cursor": page["nextCursor"]}).status_code == 200
    assert alice.get("/api/v1/capacity", params={"resourceVersion": "x"}).status_code == 400

    # -- uploads ------------------------------------------------------------------------
    spec = JOB.format(name="upl", arg="")
    assert alice.post("/api/v1/uploads", content=spec, headers={"Content-Type": "text/plain"}).status_code == 415
    assert alice.post("/api/v1/uploads", content=b"", headers={"Content-Type": "application/yaml"}).status_code == 400
    yaml_type = {"Content-Type": "application/yaml"}
    assert alice.post("/api/v1/uploads", content="name: x\n", headers=yaml_type).status_code == 422
    zip_type = {"Content-Type": "application/zip"}
    assert alice.put("/api/v1/uploads/u-nope", content=b"PK", headers=zip_type).status_code == 404
    code_dir = serve.work / "upl-code"
    code_dir.mkdir()
    (code_dir / "main.py").write_text(MAIN)
    (serve.work / "upl.yaml").write_text(spec)
    capsule = serve.work / "upl.zip"
    subprocess.run([FORGE, "capsule", "build", str(code_dir), "--job", str(serve.work / "upl.yaml"),
                    "-o", str(capsule)], env=serve.env, check=True, capture_output=True, timeout=120)
    r = alice.post("/api/v1/uploads", content=spec, headers={"Content-Type": "application/yaml"})
    assert r.status_code == 201, r.text
    assert alice.put(r.json()["url"], content=b"x", headers={"Content-Type": "text/plain"}).status_code == 415
    r = alice.post("/api/v1/uploads", content=spec, headers={"Content-Type": "application/yaml"})
    r = alice.put(r.json()["url"], params={"sha256": "2" * 64}, content=capsule.read_bytes(),
                  headers={"Content-Type": "application/zip"})
    assert r.status_code == 422 and r.json()["field"] == "sha256", r.text
    r = alice.post("/api/v1/uploads", content=spec, headers={"Content-Type": "application/yaml"})
    r = alice.put(r.json()["url"], content=capsule.read_bytes(), headers={"Content-Type": "application/zip"})
    assert r.status_code == 201, r.text

    # -- tokens, doctor, console sign-in --------------------------------------------------
    assert admin.get("/api/v1/tokens").status_code == 200
    assert alice.get("/api/v1/tokens").status_code == 403
    assert admin.post("/api/v1/tokens", json={"nope": 1}).status_code == 400
    r = admin.post("/api/v1/tokens", json={"user": "carol", "description": "ci", "expiresInSeconds": 3600})
    assert r.status_code == 201, r.text
    assert admin.post(f"/api/v1/tokens/{r.json()['id']}/revoke").status_code == 200
    assert admin.post("/api/v1/tokens/tok-000000000000/revoke").status_code == 404
    assert admin.get("/api/v1/doctor").status_code == 404  # no kuberay fleet
    assert alice.get("/api/v1/doctor").status_code == 403
    code = alice.post("/api/v1/console/login-codes").json()["code"]
    assert anon.post("/api/v1/console/login", json={"code": code}).status_code == 200
    assert anon.post("/api/v1/console/login", json={"code": code}).status_code == 401
    assert anon.post("/api/v1/console/login", content=b"[]").status_code == 400

    # -- a playground on the local fleet (kubesim's vLLM emulator) ------------------------
    assert alice.post("/api/v1/playgrounds", json={"model": "jobs/x", "bogus": 1}).status_code == 422
    assert alice.post("/api/v1/playgrounds", content=b"[").status_code == 400
    assert alice.get("/api/v1/playgrounds/pg-nope").status_code == 404
    # Which fleets can run one: the local fleet (its vLLM found), not kuberay (not configured).
    fleets = alice.get("/api/v1/playgrounds").json()["fleets"]
    assert {f["fleet"]: f["available"] for f in fleets} == {"kuberay": False, "local": True}, fleets
    assert "FORGE_S3_ENDPOINT" in next(f["message"] for f in fleets if f["fleet"] == "kuberay")
    r = alice.post("/api/v1/playgrounds", json={"model": f"jobs/{jid}/ckpt", "fleet": "local",
                                                 "gpus": 0, "ttlSeconds": 300, "cpus": "1",
                                                 "memory": "1Gi"})
    assert r.status_code == 201, r.text
    pid = r.json()["id"]
    pg = wait_for("playground Ready",
                  lambda: (lambda p: p if p["state"] in ("Ready", "Failed") else None)(
                      alice.get(f"/api/v1/playgrounds/{pid}").json()), WAIT, every=0.3)
    assert pg["state"] == "Ready", pg
    base = pg["openaiBaseUrl"]
    models = alice.get(f"{base}/models")
    assert models.status_code == 200, models.text
    model = models.json()["data"][0]["id"]
    r = alice.post(f"{base}/chat/completions",
                   json={"model": model, "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200, r.text
    assert alice.get("/api/v1/playgrounds").status_code == 200
    assert alice.post(f"/api/v1/playgrounds/{pid}/extend", json={"seconds": 60}).status_code == 200
    assert alice.post(f"/api/v1/playgrounds/{pid}/extend", json={}).status_code == 400
    assert alice.get(f"/api/v1/playgrounds/{pid}/logs", params={"tailLines": "5"}).status_code == 200
    assert alice.get(f"/api/v1/playgrounds/{pid}/events").status_code == 200
    assert alice.delete(f"/api/v1/playgrounds/{pid}").status_code == 200
    assert alice.post(f"/api/v1/playgrounds/{pid}/extend", json={"seconds": 60}).status_code == 409
    assert alice.get(f"{base}/models").status_code == 409

    # -- the verdict ------------------------------------------------------------------------
    assert checker.checked > 60, checker.checked
    verdict(checker, KUBERAY_ONLY)


def test_kuberay_answers_match_the_schema(serve_kuberay, checker):
    """The same on the kuberay fleet (kubesim + s3rver): its capacity, a job's archive, the
    doctor, a playground's pod; the verdict counts both servers' answers."""
    hooks = {"response": [checker.hook]}
    url, before = serve_kuberay.url, checker.checked
    admin = httpx.Client(base_url=url, event_hooks=hooks, timeout=60,
                         headers={"Authorization": f"Bearer {serve_kuberay.admin_token}"})
    alice = httpx.Client(base_url=url, event_hooks=hooks, timeout=60,
                         headers={"Authorization": f"Bearer {serve_kuberay.alice}"})
    assert admin.get("/api/v1/doctor").status_code == 200
    cap = wait_for("the kuberay fleet's capacity", lambda: [
        f for f in alice.get("/api/v1/capacity").json()["fleets"]
        if f["fleet"] == "kuberay" and "error" not in f], WAIT, every=0.3)
    assert cap[0]["namespace"] == "starforge"
    code = code_zip({"main.py": MAIN})
    spec = JOB.format(name="kr", arg="").replace("fleet: local", "fleet: kuberay")
    big = spec.replace("{name: main}", "{name: main, gpuSeries: h200, gpusPerMachine: 16}")
    spec = spec.replace("{name: main}", "{name: main, cpusPerMachine: 1, memoryPerMachine: 512Mi}")
    r = alice.post("/api/v1/jobs", files={"spec": ("j.yaml", big), "code": ("c.zip", code)})
    assert r.status_code == 422 and r.json()["error"] == "Rejected", r.text
    r = alice.post("/api/v1/jobs", files={"spec": ("j.yaml", spec), "code": ("c.zip", code)})
    assert r.status_code == 201, r.text
    jid = r.json()["id"]

    def ended():
        j = alice.get(f"/api/v1/jobs/{jid}").json()
        return j if j["phase"] in ("Succeeded", "Failed", "Cancelled") and j["cleanup"]["logsArchived"] else None

    job = wait_for(f"job {jid} ended and archived", ended, WAIT, every=0.5)
    assert job["phase"] == "Succeeded", job
    # The pods its RayJob requested: the head alone, with the pool's CPU and memory.
    assert job["resources"]["pods"] == [{"group": "head", "pool": "main", "pods": 1,
                                         "requests": {"cpu": "1", "memory": "512Mi", "gpus": 0}}], job
    assert "step 2" in alice.get(f"/api/v1/jobs/{jid}/logs").text
    names = [a["name"] for a in alice.get(f"/api/v1/jobs/{jid}/artifacts").json()["items"]]
    assert "driver.log" in names, names
    for name in names:
        assert alice.get(f"/api/v1/jobs/{jid}/logs", params={"file": name}).status_code == 200
    assert alice.get(f"/api/v1/jobs/{jid}/events").status_code == 200
    assert alice.get(f"/api/v1/jobs/{jid}/capsule").status_code == 200
    r = alice.post("/api/v1/playgrounds", json={"model": "Qwen/Qwen2.5-0.5B-Instruct",
                                                 "fleet": "kuberay", "series": "h200", "gpus": 1,
                                                 "ttlSeconds": 300})
    assert r.status_code == 201, r.text
    pid = r.json()["id"]
    unplaceable = {"model": "m", "fleet": "kuberay", "series": "b300"}
    assert alice.post("/api/v1/playgrounds", json=unplaceable).status_code == 422
    pg = wait_for("playground Ready", lambda: (lambda p: p if p["state"] in ("Ready", "Failed") else None)(
        alice.get(f"/api/v1/playgrounds/{pid}").json()), WAIT, every=0.3)
    assert pg["state"] == "Ready", pg
    assert alice.get(f"{pg['openaiBaseUrl']}/models").status_code == 200
    assert alice.get(f"/api/v1/playgrounds/{pid}/logs").status_code == 200
    assert alice.delete(f"/api/v1/playgrounds/{pid}").status_code == 200
    assert checker.checked - before > 15
    verdict(checker)
