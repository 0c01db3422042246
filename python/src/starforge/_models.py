"""Typed objects of the API's answers, written by hand from src/api/openapi.json.

Each class names the schema it mirrors (``__schema__``) and each field its wire name (the
``wire`` metadata; snake_case here, camelCase on the wire). python/tests/test_models_schema.py
holds them to the schema: the same properties, ``Optional`` exactly where the schema says
``nullable``. A field the server adds without the schema fails tests/api's response validation;
one added to the schema without a field here fails that test.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional

PHASES = (
    "Queued",
    "Packaging",
    "Submitting",
    "Pending",
    "Running",
    "Succeeded",
    "Failed",
    "Cancelled",
)
TERMINAL_PHASES = frozenset({"Succeeded", "Failed", "Cancelled"})
PLAYGROUND_STATES = ("Starting", "Pending", "Ready", "Stopped", "Expired", "Failed")
PLAYGROUND_ENDED = frozenset({"Stopped", "Expired", "Failed"})


def wire(name: str, kind: str = "", **kw: Any) -> Any:
    """A dataclass field read from the wire's `name`; `kind` converts it (time, a model)."""
    return field(metadata={"wire": name, "kind": kind}, **kw)


def parse_time(value: Optional[str]) -> Optional[datetime]:
    """RFC 3339 UTC (``2026-11-29T12:00:00.123Z``) as an aware datetime; None stays None."""
    if value is None:
        return None
    text = value[:-1] + "+00:00" if value.endswith("Z") else value
    t = datetime.fromisoformat(text)
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def from_wire(cls: Any, data: Dict[str, Any], **extra: Any) -> Any:
    """An instance of the model `cls` from the API's JSON object `data`."""
    kwargs: Dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        name = f.metadata.get("wire")
        if name is None:
            continue
        value = data.get(name)
        kind = f.metadata.get("kind", "")
        if value is not None:
            if kind == "time":
                value = parse_time(value)
            elif isinstance(kind, type) and dataclasses.is_dataclass(kind):
                value = from_wire(kind, value)
            elif isinstance(kind, tuple):  # (list, Model)
                value = [from_wire(kind[1], v) for v in value]
        kwargs[f.name] = value
    kwargs.update(extra)
    return cls(**kwargs)


def model_fields(cls: Any) -> Dict[str, dataclasses.Field]:  # type: ignore[type-arg]
    """Wire name → dataclass field, for the models' schema test."""
    return {f.metadata["wire"]: f for f in dataclasses.fields(cls) if "wire" in f.metadata}


@dataclass
class CapsuleRef:
    __schema__ = "CapsuleRef"
    sha256: str = wire("sha256")
    key: str = wire("key")


@dataclass
class ResourceUsage:
    """What a job's processes used, as the runner recorded it when the entrypoint ended."""

    __schema__ = "ResourceUsage"
    cpu_seconds: float = wire("cpuSeconds")
    max_rss_bytes: int = wire("maxRssBytes")


@dataclass
class JobResources:
    """What a job asks of its fleet (``pods``: the kuberay fleet's Ray pods and their requests,
    as dicts) and what it used (``usage``, once its entrypoint has ended)."""

    __schema__ = "JobResources"
    usage: Optional[ResourceUsage] = wire("usage", ResourceUsage)
    pods: Optional[List[Dict[str, Any]]] = wire("pods", default=None)


@dataclass
class Cleanup:
    __schema__ = "Job.cleanup"
    logs_archived: bool = wire("logsArchived")
    released: bool = wire("released")


@dataclass
class Transition:
    __schema__ = "Transition"
    at: datetime = wire("at", "time")
    from_phase: Optional[str] = wire("from")
    to: str = wire("to")
    reason: str = wire("reason")
    message: str = wire("message")
    cause: str = wire("cause")


@dataclass
class Event:
    __schema__ = "Event"
    type: str = wire("type")
    reason: str = wire("reason")
    message: str = wire("message")
    source: str = wire("source")
    count: int = wire("count")
    first_at: datetime = wire("firstAt", "time")
    last_at: datetime = wire("lastAt", "time")


@dataclass
class LogEnd:
    """How a followed log ended: the job's terminal state (the stream's ``end`` event)."""

    __schema__ = "LogEnd"
    phase: str = wire("phase")
    reason: str = wire("reason")
    message: str = wire("message")
    exit_code: Optional[int] = wire("exitCode")


@dataclass
class Artifact:
    __schema__ = "Artifacts.items"
    name: str = wire("name")
    size: int = wire("size")


@dataclass
class Whoami:
    __schema__ = "Whoami"
    user: str = wire("user")
    admin: bool = wire("admin")


@dataclass
class Capacity:
    """Each fleet's capacity (its own shape: docs/api.md) and the answer's version."""

    __schema__ = "Capacity"
    fleets: List[Dict[str, Any]] = wire("fleets")
    resource_version: str = wire("resourceVersion")


@dataclass
class Job:
    """A job as the API answers it. ``spec``, ``timeline`` and ``resources`` are there when the answer had them
    (``Client.job(id)`` and ``submit``); ``refresh()`` reads the job again."""

    __schema__ = "JobDetail"
    id: str = wire("id")
    name: str = wire("name")
    owner: str = wire("owner")
    fleet: str = wire("fleet")
    phase: str = wire("phase")
    reason: str = wire("reason")
    message: str = wire("message")
    exit_code: Optional[int] = wire("exitCode")
    capsule: Optional[CapsuleRef] = wire("capsule", CapsuleRef)
    cancel_requested: bool = wire("cancelRequested")
    cleanup: Cleanup = wire("cleanup", Cleanup)
    created_at: datetime = wire("createdAt", "time")
    updated_at: datetime = wire("updatedAt", "time")
    started_at: Optional[datetime] = wire("startedAt", "time")
    finished_at: Optional[datetime] = wire("finishedAt", "time")
    spec: Optional[Dict[str, Any]] = wire("spec", default=None)
    timeline: Optional[List[Transition]] = wire("timeline", (list, Transition), default=None)
    resources: Optional[JobResources] = wire("resources", JobResources, default=None)
    #: How the last ``logs(follow=True)`` ended (set when its stream ends); not on the wire.
    log_end: Optional[LogEnd] = field(default=None, repr=False, compare=False)
    _client: Any = field(default=None, repr=False, compare=False)

    @property
    def done(self) -> bool:
        """The job is in a terminal phase (Succeeded, Failed, Cancelled)."""
        return self.phase in TERMINAL_PHASES

    def _update(self, other: "Job") -> "Job":
        for f in dataclasses.fields(self):
            if f.name not in ("_client", "log_end"):
                setattr(self, f.name, getattr(other, f.name))
        return self

    def refresh(self) -> "Job":
        """Reads the job again (with ``spec`` and ``timeline``) into this object."""
        return self._update(self._client.job(self.id))

    def wait(self, timeout: Optional[float] = None, poll: float = 1.0) -> "Job":
        """Waits until the job ends and returns it; raises StarForgeError ``Timeout`` after
        ``timeout`` seconds (None: no limit)."""
        return self._client._wait_job(self, timeout, poll)

    def logs(self, follow: bool = False, tail: Optional[int] = None, file: Optional[str] = None):
        """The driver log: a string, or with ``follow=True`` an iterator over its lines as they
        are written, until the job ends (then ``self.log_end`` says how)."""
        return self._client._job_logs(self, follow, tail, file)

    def events(self) -> List[Event]:
        return self._client._job_events(self.id)

    def cancel(self) -> "Job":
        """Asks the server to cancel the job (it ends ``Cancelled``); returns it as it is now."""
        return self._update(self._client._cancel(self.id))

    def artifacts(self) -> List[Artifact]:
        """The files of the job's logs directory, each readable with ``logs(file=name)``."""
        return self._client._artifacts(self.id)


@dataclass
class Playground:
    """A vLLM server for a model, for a while (docs/playground.md)."""

    __schema__ = "Playground"
    id: str = wire("id")
    owner: str = wire("owner")
    fleet: str = wire("fleet")
    state: str = wire("state")
    reason: str = wire("reason")
    message: str = wire("message")
    spec: Dict[str, Any] = wire("spec")
    expires_at: datetime = wire("expiresAt", "time")
    ttl_remaining_seconds: int = wire("ttlRemainingSeconds")
    created_at: datetime = wire("createdAt", "time")
    ready_at: Optional[datetime] = wire("readyAt", "time")
    finished_at: Optional[datetime] = wire("finishedAt", "time")
    released: bool = wire("released")
    openai_base_url: str = wire("openaiBaseUrl")
    _client: Any = field(default=None, repr=False, compare=False)

    @property
    def ended(self) -> bool:
        return self.state in PLAYGROUND_ENDED

    def _update(self, other: "Playground") -> "Playground":
        for f in dataclasses.fields(self):
            if f.name != "_client":
                setattr(self, f.name, getattr(other, f.name))
        return self

    def refresh(self) -> "Playground":
        return self._update(self._client.playground.get(self.id))

    def wait_ready(self, timeout: Optional[float] = None, poll: float = 0.5) -> "Playground":
        """Waits until it is Ready; StarForgeError ``Timeout``, or its state when it ended."""
        return self._client._wait_playground(self, timeout, poll)

    def stop(self) -> "Playground":
        return self._update(self._client._pg_call("DELETE", self.id, ""))

    def extend(self, seconds: int) -> "Playground":
        return self._update(
            self._client._pg_call("POST", self.id, "/extend", {"seconds": int(seconds)})
        )

    def logs(self, tail_lines: Optional[int] = None) -> str:
        return self._client._pg_logs(self.id, tail_lines)

    def events(self) -> List[Dict[str, Any]]:
        return self._client._pg_events(self.id)

    @property
    def base_url(self) -> str:
        """The full base URL of its OpenAI-compatible API."""
        return self._client.server + self.openai_base_url

    def openai(self, **kwargs: Any) -> Any:
        """An ``openai.OpenAI`` client for this playground (needs the ``openai`` package)."""
        try:
            import openai  # type: ignore[import-not-found]
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError(
                "Playground.openai() needs the openai package: pip install 'starforge[openai]'"
            ) from e
        return openai.OpenAI(base_url=self.base_url, api_key=self._client.token, **kwargs)
