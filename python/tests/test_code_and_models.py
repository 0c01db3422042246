"""Without a server: the plain code upload's file selection, and the typed models held to
src/api/openapi.json (they are written by hand: python/README.md says why)."""

from __future__ import annotations

import os
import typing
import zipfile

import pytest

import starforge
from starforge import _code, _models
from openapi_check import OpenApi


def test_code_selection_follows_the_capsule_rules(tmp_path):
    root = tmp_path / "code"
    for rel in ["train.py", "pkg/mod.py", "pkg/__pycache__/mod.cpython-311.pyc", "x.pyc",
                ".git/HEAD", ".venv/bin/python", ".forge/cache", "data/big.bin", "data/keep.bin",
                "logs/a.log", "sub/logs/b.log", ".starforge/manifest.json", "sub/.starforge/ok",
                "notes/#literal"]:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(rel)
    (root / ".forgeignore").write_text(
        "# comments and blanks\n\ndata/*\n!data/keep.bin\n/logs/\n**/b.log\n\\#literal\n"
    )
    os.symlink("train.py", root / "link.py")
    os.symlink("missing", root / ".#lock")
    names = [n for n, _ in _code.collect(root)]
    assert names == sorted(names)
    assert set(names) == {".forgeignore", "data/keep.bin", "link.py", "pkg/mod.py",
                          "sub/.starforge/ok", "train.py"}
    archive, count = _code.pack(root)
    try:
        with zipfile.ZipFile(archive) as z:
            assert sorted(z.namelist()) == sorted(names) and count == len(names)
            assert z.read("link.py") == b"train.py"
    finally:
        archive.unlink()
    os.symlink(str(tmp_path), root / "escape")
    with pytest.raises(starforge.StarForgeError, match="outside the code directory"):
        _code.collect(root)


def _merged(api: OpenApi, name: str):
    schema = api.inline({"$ref": f"#/components/schemas/{name.split('.')[0]}"}, name)
    for part in name.split(".")[1:]:
        schema = schema["properties"][part]
        if "anyOf" in schema:
            schema = schema["anyOf"][1]
    return schema


MODELS = [starforge.Job, starforge.Transition, starforge.Event, starforge.Playground,
          starforge.Whoami, starforge.Capacity, starforge.CapsuleRef, starforge.Cleanup,
          starforge.LogEnd, starforge.Artifact, starforge.JobResources, starforge.ResourceUsage]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_models_hold_to_the_schema(model):
    api = OpenApi()
    name = model.__schema__.replace("Artifacts.items", "Artifacts")
    schema = _merged(api, name)
    if model is starforge.Artifact:
        schema = schema["properties"]["items"]["items"]
    fields = _models.model_fields(model)
    assert set(fields) == set(schema["properties"]), (
        f"{model.__name__} and openapi.json's {model.__schema__} name different fields"
    )
    hints = typing.get_type_hints(model)
    for wire, f in fields.items():
        prop = schema["properties"][wire]
        nullable = "anyOf" in prop and prop["anyOf"][0] == {"type": "null"}
        optional = type(None) in typing.get_args(hints[f.name])
        required = wire in schema.get("required", [])
        # Optional in Python exactly where the wire may carry null or leave the field out.
        assert optional == (nullable or not required), f"{model.__name__}.{f.name} ({wire})"


def test_every_answer_schema_has_a_model_or_is_named_here():
    """A new schema in openapi.json needs a model (or a line here saying why not)."""
    without_model = {
        "Error": "StarForgeError", "FieldError": "starforge.FieldError",
        "Phase": "a str (starforge.PHASES)", "JobSpec": "a dict (the canonical JobSpec)",
        "JobWithSpec": "Job", "JobList": "Client.jobs() returns List[Job]",
        "EventList": "Job.events() returns List[Event]",
        "PlaygroundList": "Client.playgrounds() returns List[Playground]",
        "PlaygroundSpec": "Playground.spec is a dict; playground.start() takes its fields",
        "LocalFleetCapacity": "Capacity.fleets are dicts (each fleet its shape)",
        "KubeRayFleetCapacity": "as LocalFleetCapacity", "FleetCapacityError": "as LocalFleetCapacity",
        "FleetUnavailable": "as LocalFleetCapacity",
        "PlaygroundEvent": "Playground.events() returns dicts", "PlaygroundEventList": "the same",
        "Upload": "submit() sends the code itself", "CapsuleInfo": "not in the SDK yet",
        "Token": "admin routes: not in the SDK", "TokenList": "the same", "CreatedToken": "the same",
        "Doctor": "the same", "LoginCode": "the web console's sign-in", "LoginToken": "the same",
        "PodRequest": "JobResources.pods are dicts",
    }
    have = {m.__schema__.split(".")[0] for m in MODELS}
    missing = set(OpenApi().components["schemas"]) - have - set(without_model)
    assert not missing, f"schemas without a model in python/src/starforge/_models.py: {missing}"
