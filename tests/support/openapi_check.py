"""Holds the API's answers to src/api/openapi.json, strictly: one wire schema.

Every answer a test receives is looked up by method, path and status in the OpenAPI document;
a status the operation does not declare fails, and a JSON body is validated against the
declared schema made strict:

- ``$ref`` inlined and ``allOf`` merged into one object, OpenAPI's ``nullable`` as JSON
  Schema's ``null``;
- an object schema with ``properties`` and no ``additionalProperties`` allows no other
  property — a field the server sends that the schema does not declare fails (only schemas that
  say ``additionalProperties: true``, such as the JobSpec, stay open);
- ``format: date-time`` is RFC 3339 UTC with milliseconds, as the server writes times.

The reverse — a property the schema declares that the server never sends — is found by
`unseen()`: every property of every named schema the answers were validated against, that no
answer had, except those a test explains as not reachable from it.
"""

from __future__ import annotations

import copy
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

import jsonschema

REPO = Path(__file__).resolve().parents[2]
OPENAPI = REPO / "src" / "api" / "openapi.json"
METHODS = ("get", "put", "post", "delete", "patch")
_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z$")


def _format_checker() -> jsonschema.FormatChecker:
    checker = jsonschema.FormatChecker(formats=())

    @checker.checks("date-time")
    def _date_time(value: object) -> bool:
        return not isinstance(value, str) or bool(_TIME.match(value))

    return checker


class OpenApi:
    def __init__(self, path: Path = OPENAPI) -> None:
        self.doc = json.loads(path.read_text(encoding="utf-8"))
        self.components = self.doc["components"]
        self._routes: List[Tuple[re.Pattern, str]] = []  # type: ignore[type-arg]
        for template in sorted(self.doc["paths"], key=lambda t: (t.count("{"), t)):
            rx = "^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)) + "$"
            self._routes.append((re.compile(rx), template))
        self._cache: Dict[str, Any] = {}

    # -- the schema, inlined and strict ----------------------------------------------------
    def _ref(self, ref: str) -> Tuple[str, Any]:
        parts = ref.lstrip("#/").split("/")
        node: Any = self.doc
        for p in parts:
            node = node[p]
        return parts[-1], node

    def inline(self, schema: Any, name: str) -> Any:
        """`schema` with refs inlined, allOf merged, nullable as null; objects named `name`."""
        if not isinstance(schema, dict):
            return schema
        if "$ref" in schema:
            ref_name, target = self._ref(schema["$ref"])
            if ref_name not in self._cache:
                self._cache[ref_name] = self.inline(target, ref_name)
            out = copy.deepcopy(self._cache[ref_name])
            if schema.get("nullable"):
                out = {"anyOf": [{"type": "null"}, out]}
            return out
        s = {k: v for k, v in schema.items() if k not in ("example", "description", "default")}
        nullable = s.pop("nullable", False)
        if "allOf" in s:
            merged: Dict[str, Any] = {"type": "object", "properties": {}, "required": []}
            for part in s.pop("allOf"):
                p = self.inline(part, name)
                if "anyOf" in p and len(p["anyOf"]) == 2 and p["anyOf"][0] == {"type": "null"}:
                    p = p["anyOf"][1]
                if "properties" not in p and "enum" in p or p.get("type") not in (None, "object"):
                    merged = p  # allOf: [a non-object] is that schema (e.g. a Phase)
                    continue
                merged["properties"].update(p.get("properties", {}))
                merged["required"] += [r for r in p.get("required", []) if r not in merged["required"]]
                if p.get("additionalProperties") is True:
                    merged["additionalProperties"] = True
            merged.update({k: v for k, v in s.items() if k not in ("type",)})
            merged.pop("allOf", None)
            s = merged
        if "properties" in s:
            s["properties"] = {
                k: self.inline(v, f"{name}.{k}") for k, v in s["properties"].items()
            }
            s.setdefault("additionalProperties", False)
            s["x-name"] = name
        if isinstance(s.get("additionalProperties"), dict):
            s["additionalProperties"] = self.inline(s["additionalProperties"], name + ".*")
        if "items" in s:
            s["items"] = self.inline(s["items"], name + "[]")
        for key in ("anyOf", "oneOf"):
            if key in s:
                s[key] = [self.inline(v, name) for v in s[key]]
        if nullable:
            if "enum" in s:
                s["enum"] = list(s["enum"]) + [None]
            s = {"anyOf": [{"type": "null"}, s]}
        return s

    # -- answers ---------------------------------------------------------------------------
    def operation(self, method: str, path: str) -> Tuple[Optional[str], Optional[Dict[str, Any]]]:
        for rx, template in self._routes:
            if rx.match(path):
                return template, self.doc["paths"][template].get(method.lower())
        return None, None

    def response_schema(
        self, method: str, path: str, status: int, content_type: str
    ) -> Tuple[str, Optional[Any]]:
        """(where, schema) for an answer; raises AssertionError when the document lacks it."""
        template, op = self.operation(method, path)
        where = f"{method} {template or path} → {status}"
        if op is None:
            # No such route or method: the server's generic JSON errors (404, 405).
            if status in (404, 405):
                return where, self.inline({"$ref": "#/components/schemas/Error"}, "Error")
            raise AssertionError(f"{where}: no such operation in openapi.json")
        responses = op.get("responses", {})
        resp = responses.get(str(status)) or responses.get("default")
        if resp is None:
            raise AssertionError(
                f"{where}: status {status} is not declared (declared: {sorted(responses)})"
            )
        if "$ref" in resp:
            _, resp = self._ref(resp["$ref"])
        media = content_type.split(";")[0].strip()
        content = resp.get("content", {})
        if media not in content:
            raise AssertionError(
                f"{where}: answered {media}, declared {sorted(content) or 'no body'}"
            )
        schema = content[media].get("schema")
        return where, None if schema is None else self.inline(schema, where)


class Checker:
    """Validates answers (`check`) and remembers which properties of which schema it saw."""

    def __init__(self, api: Optional[OpenApi] = None) -> None:
        self.api = api or OpenApi()
        self.checked = 0
        self.problems: List[str] = []
        self.declared: Dict[str, Set[str]] = {}
        self.seen: Dict[str, Set[str]] = defaultdict(set)
        self.statuses: Set[str] = set()
        self._format = _format_checker()

    def check(self, method: str, path: str, status: int, content_type: str, body: bytes) -> None:
        try:
            where, schema = self.api.response_schema(method, path, status, content_type)
        except AssertionError as e:
            self.problems.append(str(e))
            return
        self.statuses.add(where)
        if not content_type.startswith("application/json") or schema is None:
            self.checked += 1
            return
        try:
            instance = json.loads(body)
        except ValueError:
            self.problems.append(f"{where}: the body is not JSON: {body[:200]!r}")
            return
        validator = jsonschema.Draft202012Validator(schema, format_checker=self._format)
        errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
        for e in errors[:5]:
            at = "".join(f"[{p!r}]" for p in e.absolute_path) or "(the body)"
            self.problems.append(f"{where}: at {at}: {e.message}")
        if not errors:
            self._record(schema, instance)
        self.checked += 1

    def check_named(self, name: str, instance: Any, where: str) -> None:
        """Validates `instance` (e.g. an SSE event's data) against components/schemas/`name`."""
        schema = self.api.inline({"$ref": f"#/components/schemas/{name}"}, name)
        validator = jsonschema.Draft202012Validator(schema, format_checker=self._format)
        errors = list(validator.iter_errors(instance))
        for e in errors[:5]:
            at = "".join(f"[{p!r}]" for p in e.absolute_path) or "(the data)"
            self.problems.append(f"{where} ({name}): at {at}: {e.message}")
        if not errors:
            self._record(schema, instance)
        self.checked += 1

    def check_like(self, method: str, path: str, instance: Any, where: str) -> None:
        """Validates `instance` (an SSE event's data) as the JSON answer 200 of method path."""
        _, schema = self.api.response_schema(method, path, 200, "application/json")
        validator = jsonschema.Draft202012Validator(schema, format_checker=self._format)
        errors = list(validator.iter_errors(instance))
        for e in errors[:5]:
            at = "".join(f"[{p!r}]" for p in e.absolute_path) or "(the data)"
            self.problems.append(f"{where}: at {at}: {e.message}")
        if not errors:
            self._record(schema, instance)
        self.checked += 1

    def hook(self, response: Any) -> None:
        """An httpx response hook: checks every answer that is not a stream."""
        ctype = response.headers.get("content-type", "")
        if ctype.startswith("text/event-stream"):
            self.statuses.add(f"{response.request.method} {response.request.url.path} (stream)")
            return
        response.read()
        self.check(response.request.method, response.request.url.path, response.status_code,
                   ctype, response.content)

    def _record(self, schema: Any, instance: Any) -> None:
        if not isinstance(schema, dict):
            return
        for key in ("anyOf", "oneOf"):
            for branch in schema.get(key, []):
                if jsonschema.Draft202012Validator(branch).is_valid(instance):
                    self._record(branch, instance)
        if isinstance(instance, dict) and "properties" in schema:
            name = schema.get("x-name", "?")
            self.declared[name] = set(schema["properties"])
            self.seen[name].update(instance)
            for k, v in instance.items():
                if k in schema["properties"]:
                    self._record(schema["properties"][k], v)
        if isinstance(instance, list) and "items" in schema:
            for v in instance:
                self._record(schema["items"], v)

    def unseen(self, allowed: Dict[str, str]) -> List[str]:
        """'Schema.property' declared for answers but in none of them, less `allowed`."""
        out = []
        for name, props in sorted(self.declared.items()):
            base = name.split(" → ")[-1]
            for p in sorted(props - self.seen[name]):
                if f"{base}.{p}" not in allowed and f"{name}.{p}" not in allowed:
                    out.append(f"{name}.{p}")
        return out
