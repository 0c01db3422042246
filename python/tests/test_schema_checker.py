"""The response checker (tests/support/openapi_check.py) fails what it must: a field the schema
does not declare, a missing required one, a wrong type, an undeclared status, and a declared
property no answer carries."""

from __future__ import annotations

import json

from openapi_check import Checker

JOB = {
    "id": "j-k3v9x0a1b2", "name": "x", "owner": "alice", "fleet": "local", "phase": "Running",
    "reason": "", "message": "", "exitCode": None, "capsule": None, "cancelRequested": False,
    "cleanup": {"logsArchived": False, "released": False},
    "createdAt": "2026-11-29T12:00:00.123Z", "updatedAt": "2026-11-29T12:00:00.123Z",
    "startedAt": None, "finishedAt": None, "spec": {"any": "thing"},
    "timeline": [{"at": "2026-11-29T12:00:00.123Z", "from": None, "to": "Queued", "reason": "",
                  "message": "", "cause": "api"}],
    "resources": {"usage": {"cpuSeconds": 1.5, "maxRssBytes": 1048576},
                  "pods": [{"group": "head", "pool": "main", "pods": 1,
                            "requests": {"cpu": "1", "memory": "1Gi", "gpus": 0}}]},
}


def check(body, status=200, path="/api/v1/jobs/j-k3v9x0a1b2"):
    c = Checker()
    c.check("GET", path, status, "application/json", json.dumps(body).encode())
    return c


def test_a_good_answer_passes():
    assert check(JOB).problems == []


def test_what_the_schema_does_not_say_fails():
    assert "'extra' was unexpected" in check(dict(JOB, extra=1)).problems[0]
    assert "'cleanup'" in check({k: v for k, v in JOB.items() if k != "cleanup"}).problems[0]
    assert check(dict(JOB, exitCode="0")).problems
    assert check(dict(JOB, phase="Sleeping")).problems
    assert check(dict(JOB, createdAt="yesterday")).problems
    assert check(dict(JOB, cleanup={"logsArchived": False, "released": False, "x": 1})).problems
    assert "not declared" in check({"error": "Conflict", "message": "m"}, status=418).problems[0]
    assert check({"error": "NoSuchKind", "message": "m"}, status=404).problems


def test_a_declared_property_no_answer_carries_is_named():
    c = check(JOB)
    assert "Job.capsule" not in c.unseen({})  # null is an answer too
    assert c.unseen({}) == []
    c = check({k: v for k, v in JOB.items() if k != "timeline"}, path="/api/v1/jobs/j-1")
    assert "JobDetail.timeline" in c.unseen({})
    assert c.unseen({"JobDetail.timeline": "why"}) == []
