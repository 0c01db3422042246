"""starforge.Client against a real forge serve (local fleet): submit, follow, wait, cancel,
list, capacity, errors, playgrounds, and the CLI's configuration."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import httpx
import pytest

import starforge
from forge_serve import wait_for

WAIT = 240.0  # seconds: an ASan build beside a CPU burner

SPEC = {
    "name": "sdk-test",
    "fleet": "local",
    "image": "python:3.11",
    "entrypoint": "python3 main.py",
    "pools": [{"name": "main"}],
}


def test_submit_follow_wait(client, code_dir, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: sdk-yaml  # a YAML JobSpec with its own code: line\n"
        "fleet: local\nimage: python:3.11\nentrypoint: python3 main.py\n"
        f"code: {os.path.relpath(code_dir, tmp_path)}\npools: [{{name: main}}]\n"
    )
    sent = []
    job = client.submit(spec, use_forge=False, progress=lambda s, t: sent.append((s, t)))
    assert isinstance(job, starforge.Job)
    assert job.id.startswith("j-") and job.name == "sdk-yaml" and job.owner == "alice"
    assert job.phase in starforge.PHASES and isinstance(job.created_at, datetime)
    assert job.spec is not None and job.spec["entrypoint"]
    assert sent and sent[-1][0] == sent[-1][1], sent  # progress reached the whole archive

    lines = list(job.logs(follow=True))
    assert [ln for ln in lines if ln.startswith("step ")] == [
        f"step {i} loss {1.0 / (i + 1)}" for i in range(5)
    ]
    assert job.log_end is not None and job.log_end.phase == "Succeeded"
    assert job.log_end.exit_code == 0

    assert job.wait(timeout=WAIT) is job and job.phase == "Succeeded" and job.done
    assert job.exit_code == 0 and job.finished_at is not None and job.capsule is not None
    assert job.capsule.key == f"capsules/sha256-{job.capsule.sha256}.zip"
    assert [t.to for t in job.timeline or []][:1] == ["Queued"]
    assert job.timeline[0].from_phase is None
    assert "step 4" in job.logs() and job.logs(tail=1).count("\n") <= 1
    assert all(isinstance(e, starforge.Event) for e in job.events())
    wait_for("logs archived", lambda: job.refresh().cleanup.logs_archived, WAIT)
    assert "driver.log" in [a.name for a in job.artifacts()]
    assert "step 0" in job.logs(file="driver.log")

    listed = client.jobs(phase="Succeeded", name="sdk-yaml")
    assert job.id in [j.id for j in listed] and all(isinstance(j, starforge.Job) for j in listed)
    assert client.job(job.id).timeline


def test_submit_with_forge_dict_spec_and_failure(client, code_dir, forge_bin):
    client._forge = forge_bin  # the CLI's capsule builder, as with forge on the PATH
    job = client.submit(dict(SPEC, name="sdk-forge", env={"EXIT": "3"}), code=code_dir,
                        use_forge=True)
    assert job.name == "sdk-forge" and job.spec["env"] == {"EXIT": "3"}
    job.wait(timeout=WAIT)
    assert job.phase == "Failed" and job.exit_code == 3 and job.reason, job
    # The same tree again: the CLI sends only the digest; the job runs the same capsule.
    again = client.submit(dict(SPEC, name="sdk-forge", env={"EXIT": "3"}), code=code_dir,
                          use_forge=True)
    assert again.wait(timeout=WAIT).capsule.sha256 == job.capsule.sha256
    # A JobSpec the server refuses: the API's error kind and fields, as without forge.
    with pytest.raises(starforge.StarForgeError) as e:
        client.submit(dict(SPEC, pools=[{"name": "main", "gpusPerMachine": -1}]), code=code_dir,
                      use_forge=True)
    assert (e.value.status, e.value.code) == (422, "Invalid"), e.value
    assert "pools[0].gpusPerMachine" in [x.field for x in e.value.errors] + [e.value.field]


def test_cancel_and_wait_timeout(client, code_dir):
    job = client.submit(dict(SPEC, name="sdk-long", entrypoint="python3 main.py 600"),
                        code=code_dir, use_forge=False)
    wait_for("Running", lambda: job.refresh().phase == "Running", WAIT, every=0.3)
    with pytest.raises(starforge.StarForgeError) as e:
        job.wait(timeout=0.5)
    assert e.value.code == "Timeout"
    cap = client.capacity()
    local = [f for f in cap.fleets if f["fleet"] == "local"][0]
    assert job.id in [j["id"] for j in local["jobs"]] and cap.resource_version
    assert job.cancel() is job and job.cancel_requested
    job.wait(timeout=WAIT)
    assert job.phase == "Cancelled", job
    assert "CancelRequested" in [e.reason for e in job.events()]


def test_errors_carry_the_api_error(client, serve, checker, code_dir):
    with pytest.raises(starforge.StarForgeError) as e:
        client.submit(dict(SPEC, name="Bad_Name", pools=[{"name": "main", "gpusPerMachine": -1}]),
                      code=code_dir, use_forge=False)
    err = e.value
    assert err.status == 422 and err.code == "Invalid" and len(err.errors) >= 2, err
    assert "pools[0].gpusPerMachine" in [x.field for x in err.errors]
    with pytest.raises(starforge.StarForgeError) as e:
        client.submit(dict(SPEC, pools=[{"name": "main", "machines": 2}]), code=code_dir,
                      use_forge=False)
    assert e.value.code == "Rejected" and e.value.status == 422
    with pytest.raises(starforge.StarForgeError) as e:
        client.job("j-0000000000")
    assert (e.value.status, e.value.code) == (404, "NotFound")
    with pytest.raises(starforge.StarForgeError) as e:
        client.submit(SPEC, use_forge=False)
    assert e.value.code == "Code" and "code" in e.value.message
    with pytest.raises(starforge.StarForgeError) as e:
        client.submit(SPEC, code=code_dir / "missing", use_forge=False)
    assert e.value.code == "Code"
    bad = starforge.Client(server=serve.url, token="sf_" + "0" * 40)
    with pytest.raises(starforge.StarForgeError) as e:
        bad.whoami()
    assert (e.value.status, e.value.code) == (401, "Unauthorized")
    # `owner` is for admins; anyone else gets their own jobs, whatever it says.
    assert {j.owner for j in client.jobs(owner="bob")} <= {"alice"}


def test_admin_lists_by_owner(admin, client, code_dir):
    job = client.submit(dict(SPEC, name="sdk-owned"), code=code_dir, use_forge=False)
    assert admin.whoami() == starforge.Whoami(user="admin", admin=True)
    assert client.whoami().admin is False
    mine = admin.jobs(owner="alice", limit=None)
    assert job.id in [j.id for j in mine] and {j.owner for j in mine} == {"alice"}
    assert admin.jobs(owner="nobody-at-all") == []
    page = client.jobs(limit=1)
    assert len(page) == 1
    job.wait(timeout=WAIT)


def test_playground(client, code_dir):
    job = client.submit(dict(SPEC, name="sdk-ckpt"), code=code_dir, use_forge=False)
    assert job.wait(timeout=WAIT).phase == "Succeeded"
    pg = client.playground.start(f"jobs/{job.id}/ckpt", fleet="local", gpus=0, ttl_seconds=300)
    assert isinstance(pg, starforge.Playground) and pg.state in starforge._models.PLAYGROUND_STATES
    assert pg.openai_base_url == f"/api/v1/playgrounds/{pg.id}/openai/v1"
    assert pg.wait_ready(timeout=WAIT).state == "Ready" and pg.ready_at is not None
    assert pg.id in [p.id for p in client.playgrounds()]
    models = httpx.get(pg.base_url + "/models", headers={"Authorization": f"Bearer {client.token}"})
    assert models.status_code == 200, models.text
    chat = pg.openai()  # the official client (scripts/python-sdk-requirements.txt pins it)
    model = chat.models.list().data[0].id
    reply = chat.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content
    stream = chat.chat.completions.create(model=model, stream=True,
                                          messages=[{"role": "user", "content": "hi"}])
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    before = pg.expires_at
    assert pg.extend(120).expires_at > before
    assert isinstance(pg.logs(tail_lines=5), str) and pg.events() == []
    assert pg.stop().state == "Stopped" and pg.ended
    with pytest.raises(starforge.StarForgeError) as e:
        pg.extend(60)
    assert e.value.status == 409


def test_configured_like_the_cli(serve, forge_bin, tmp_path, monkeypatch):
    """`forge login` writes the file; Client() reads it, and FORGE_SERVER/FORGE_TOKEN first."""
    home = tmp_path / "home"
    home.mkdir()
    env = dict(serve.env, HOME=str(home))
    env.pop("XDG_CONFIG_HOME", None)
    out = subprocess.run([forge_bin, "login", "--server", serve.url, "--token-stdin"],
                         input=serve.alice + "\n", env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    for k in ("FORGE_SERVER", "FORGE_TOKEN", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(home))
    c = starforge.Client()
    assert (c.server, c.token) == (serve.url, serve.alice)
    assert c.whoami().user == "alice"
    # FORGE_TOKEN comes before the file; the file's token is not sent to another server.
    monkeypatch.setenv("FORGE_TOKEN", serve.admin_token)
    assert starforge.Client().token == serve.admin_token
    monkeypatch.delenv("FORGE_TOKEN")
    monkeypatch.setenv("FORGE_SERVER", "http://127.0.0.1:9/")
    c = starforge.Client()
    assert (c.server, c.token) == ("http://127.0.0.1:9", "")
    with pytest.raises(starforge.StarForgeError) as e:
        c.whoami()
    assert e.value.code == "Connection"
    # XDG_CONFIG_HOME (absolute) is where the file is looked for first.
    monkeypatch.delenv("FORGE_SERVER")
    xdg = tmp_path / "xdg" / "starforge"
    xdg.mkdir(parents=True)
    (xdg / "config.json").write_text(json.dumps({"server": "127.0.0.1:8", "token": "sf_x"}))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert (starforge.Client().server, starforge.Client().token) == ("http://127.0.0.1:8", "sf_x")
    (xdg / "config.json").write_text("[1]")
    with pytest.raises(starforge.StarForgeError, match="not a JSON object"):
        starforge.Client()
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/ignored")
    assert starforge.Client().server == serve.url


def test_wheel_builds_and_imports(tmp_path):
    """`pip install ./python`: the wheel (built offline) holds the typed package."""
    # Built from a copy: setuptools writes build/ and *.egg-info beside the sources.
    root = tmp_path / "python"
    shutil.copytree(Path(__file__).resolve().parents[1], root,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tests"))
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
         "--disable-pip-version-check", str(root), "-w", str(tmp_path / "dist")],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    (wheel,) = (tmp_path / "dist").glob("starforge-*.whl")
    target = tmp_path / "site"
    out = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
         "--disable-pip-version-check", "--target", str(target), str(wheel)],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert (target / "starforge" / "py.typed").exists()
    probe = subprocess.run(
        [sys.executable, "-c", "import starforge, sys; print(starforge.__file__)"],
        env=dict(os.environ, PYTHONPATH=str(target)), capture_output=True, text=True,
        cwd=str(tmp_path),
    )
    assert probe.stdout.strip().startswith(str(target)), probe.stderr


def test_kuberay_fleet_on_kubesim(serve_kuberay, checker, code_dir):
    """The same calls against the kuberay fleet (kubesim + s3rver): a RayJob per job."""
    from conftest import make_client

    client = make_client(serve_kuberay, checker, serve_kuberay.alice)
    job = client.submit(dict(SPEC, name="sdk-kuberay", fleet="kuberay"), code=code_dir,
                        use_forge=False)
    assert job.fleet == "kuberay"
    lines = list(job.logs(follow=True))
    assert "step 4 loss 0.2" in lines and job.log_end.phase == "Succeeded", lines
    assert job.wait(timeout=WAIT).phase == "Succeeded"
    wait_for("logs archived", lambda: job.refresh().cleanup.logs_archived, WAIT)
    assert "driver.log" in [a.name for a in job.artifacts()]
    kuberay = [f for f in client.capacity().fleets if f["fleet"] == "kuberay"]
    assert kuberay and kuberay[0]["namespace"] == "starforge", kuberay
    pg = client.playground.start("Qwen/Qwen2.5-0.5B-Instruct", fleet="kuberay", series="h200",
                                 gpus=1, ttl_seconds=300)
    assert pg.fleet == "kuberay" and pg.spec["series"] == "h200"
    assert pg.wait_ready(timeout=WAIT).state == "Ready"
    assert pg.stop().state == "Stopped"
    with pytest.raises(starforge.StarForgeError) as e:
        client.playground.start("m", fleet="kuberay", series="b300")
    assert (e.value.status, e.value.code) == (422, "Rejected"), e.value
    client.close()
