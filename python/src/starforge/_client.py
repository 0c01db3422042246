"""starforge.Client: the REST API of `forge serve` (docs/api.md) from Python."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Union

import httpx

from . import _code, _config
from ._errors import StarForgeError
from ._models import (
    Artifact,
    Capacity,
    Event,
    Job,
    LogEnd,
    Playground,
    Whoami,
    from_wire,
)

SpecLike = Union[str, "os.PathLike[str]", Mapping[str, Any], Any]
Progress = Union[bool, Callable[[int, int], None], None]

_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
# A followed log sends `: keep-alive` every 15 s: a minute of silence is a dead connection.
_STREAM_TIMEOUT = httpx.Timeout(30.0, connect=10.0, read=60.0)
_UPLOAD_TIMEOUT = httpx.Timeout(30.0, connect=10.0, write=None, read=600.0)


def _sse(lines: Iterator[str]) -> Iterator[Dict[str, Any]]:
    """Server-Sent Events: {"event", "data", "id"} per event (comments skipped)."""
    event, data, ident = "", [], None
    for line in lines:
        if line == "":
            if data or event:
                yield {"event": event or "message", "data": "\n".join(data), "id": ident}
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
        elif name == "id":
            ident = value


class _ProgressFile:
    """A file whose reads are counted for an upload's progress."""

    def __init__(self, f: Any, total: int, report: Callable[[int, int], None]) -> None:
        self._f, self._total, self._report, self._sent = f, total, report, 0

    def read(self, n: int = -1) -> bytes:
        chunk = self._f.read(n)
        self._sent += len(chunk)
        self._report(self._sent, self._total)
        return chunk

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)


def _progress_reporter(progress: Progress, what: str) -> Optional[Callable[[int, int], None]]:
    if callable(progress):
        return progress
    if not progress:
        return None
    try:
        from tqdm.auto import tqdm  # type: ignore[import-untyped]
    except ImportError:
        tqdm = None
    state: Dict[str, Any] = {}

    def report(sent: int, total: int) -> None:
        if tqdm is not None:
            bar = state.get("bar")
            if bar is None:
                bar = state["bar"] = tqdm(total=total, unit="B", unit_scale=True, desc=what)
            bar.update(sent - bar.n)
            if sent >= total:
                bar.close()
        elif sent >= total or sent - state.get("shown", 0) >= max(total // 20, 1):
            state["shown"] = sent
            print(f"\r{what}: {sent} of {total} bytes", end="\n" if sent >= total else "",
                  file=sys.stderr, flush=True)

    return report


class _Playgrounds:
    """``client.playground``: start, get and list playgrounds."""

    def __init__(self, client: "Client") -> None:
        self._c = client

    def start(
        self,
        model: str,
        *,
        series: Optional[str] = None,
        gpus: Optional[int] = None,
        ttl_seconds: Optional[int] = None,
        image: Optional[str] = None,
        served_model_name: Optional[str] = None,
        args: Optional[List[str]] = None,
        fleet: Optional[str] = None,
        cpus: Optional[str] = None,
        memory: Optional[str] = None,
    ) -> Playground:
        """Starts a vLLM server for ``model`` (``jobs/<id>/…`` a job of yours wrote, or a model
        name the image can load); it is ``Starting`` — ``wait_ready()`` waits for ``Ready``."""
        body: Dict[str, Any] = {"model": model}
        for key, value in (
            ("series", series),
            ("gpus", gpus),
            ("ttlSeconds", ttl_seconds),
            ("image", image),
            ("servedModelName", served_model_name),
            ("args", args),
            ("fleet", fleet),
            ("cpus", cpus),
            ("memory", memory),
        ):
            if value is not None:
                body[key] = value
        return self._c._playground(self._c._request("POST", "/api/v1/playgrounds", json=body))

    def get(self, playground_id: str) -> Playground:
        return self._c._playground(self._c._request("GET", f"/api/v1/playgrounds/{playground_id}"))

    def list(self) -> List[Playground]:
        items = self._c._request("GET", "/api/v1/playgrounds")["items"]
        return [self._c._playground(p) for p in items]


class Client:
    """A client of one StarForge server.

    ``server`` and ``token`` default as the ``forge`` CLI's: ``FORGE_SERVER`` / ``FORGE_TOKEN``,
    else what ``forge login`` saved (``~/.config/starforge/config.json``), else
    ``http://127.0.0.1:8080``. Synchronous (no event loop of its own), so it works in Jupyter.
    """

    def __init__(
        self,
        server: Optional[str] = None,
        token: Optional[str] = None,
        *,
        timeout: Optional[httpx.Timeout] = None,
        forge: Optional[str] = None,
    ) -> None:
        self.server, self.token = _config.resolve(server, token)
        headers = {"User-Agent": "starforge-python/0.1"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        self._http = httpx.Client(base_url=self.server, headers=headers, timeout=timeout or _TIMEOUT)
        self._forge = forge
        self.playground = _Playgrounds(self)

    # -- plumbing --------------------------------------------------------------------------
    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _raise_for(self, r: httpx.Response) -> None:
        if r.status_code < 400:
            return
        try:
            body = r.json()
        except ValueError:
            body = None
        raise StarForgeError.from_response(
            r.status_code, body, f"{r.request.method} {r.request.url.path}: {r.text[:200]}"
        )

    def _send(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            r = self._http.request(method, path, **kw)
        except httpx.TransportError as e:
            raise StarForgeError(
                "Connection",
                f"cannot reach {self.server}: {e} — is `forge serve` running? "
                "set FORGE_SERVER or run `forge login`",
            ) from e
        self._raise_for(r)
        return r

    def _request(self, method: str, path: str, **kw: Any) -> Any:
        r = self._send(method, path, **kw)
        try:
            return r.json()
        except ValueError:
            raise StarForgeError(
                "HTTP", f"{method} {path}: the answer is not JSON (is {self.server} StarForge?)",
                status=r.status_code,
            ) from None

    def _job(self, data: Dict[str, Any]) -> Job:
        return from_wire(Job, data, _client=self)

    def _playground(self, data: Dict[str, Any]) -> Playground:
        return from_wire(Playground, data, _client=self)

    # -- who and what ----------------------------------------------------------------------
    def whoami(self) -> Whoami:
        return from_wire(Whoami, self._request("GET", "/api/v1/whoami"))

    def capacity(self) -> Capacity:
        """What each fleet has and uses (docs/api.md, ``GET /api/v1/capacity``)."""
        return from_wire(Capacity, self._request("GET", "/api/v1/capacity"))

    # -- jobs ------------------------------------------------------------------------------
    def job(self, job_id: str) -> Job:
        """One job, with its ``spec`` and ``timeline``."""
        return self._job(self._request("GET", f"/api/v1/jobs/{job_id}"))

    def jobs(
        self,
        *,
        owner: Optional[str] = None,
        phase: Optional[str] = None,
        fleet: Optional[str] = None,
        name: Optional[str] = None,
        limit: Optional[int] = 50,
    ) -> List[Job]:
        """Jobs, newest first: yours, or ``owner``'s (admins). ``limit=None``: every one."""
        params: Dict[str, Any] = {
            k: v for k, v in (("owner", owner), ("phase", phase), ("fleet", fleet), ("name", name))
            if v is not None
        }
        out: List[Job] = []
        cursor: Optional[str] = None
        while limit is None or len(out) < limit:
            page = 500 if limit is None else min(500, limit - len(out))
            q = dict(params, limit=page)
            if cursor:
                q["cursor"] = cursor
            body = self._request("GET", "/api/v1/jobs", params=q)
            out.extend(self._job(j) for j in body["items"])
            cursor = body.get("nextCursor")
            if not cursor:
                break
        return out

    def submit(
        self,
        spec: SpecLike,
        code: Optional[Union[str, "os.PathLike[str]"]] = None,
        *,
        use_forge: Optional[bool] = None,
        progress: Progress = None,
    ) -> Job:
        """Submits a job: ``spec`` is a JobSpec file (YAML or JSON), a dict, or an object with
        ``to_dict()`` (or a dataclass); ``code`` the directory to send (default: the JobSpec's
        ``code:``, relative to its file).

        With ``forge`` on the PATH (or ``use_forge=True``) the code is packed and sent by
        ``forge submit`` — the CLI's capsule builder, which reuses the last build's entries
        and sends nothing when the server already has the capsule. Otherwise (or
        ``use_forge=False``) it is zipped here and sent as the API's ``code`` part, which the
        server packs. ``progress``: True (tqdm when installed) or a callable(sent, total).
        """
        spec_dict, spec_text, spec_dir = _read_spec(spec)
        code_dir = _code_dir(code, spec_dict, spec_text, spec_dir)
        forge = self._forge_binary(use_forge)
        if forge:
            return self._submit_forge(forge, spec_text, code_dir)
        return self._submit_plain(spec_text, code_dir, progress)

    def _forge_binary(self, use_forge: Optional[bool]) -> Optional[str]:
        if use_forge is False:
            return None
        found = self._forge or shutil.which("forge")
        if use_forge and not found:
            raise StarForgeError("SubmitFailed", "use_forge=True but no forge on the PATH")
        return found

    def _submit_plain(self, spec_text: str, code_dir: Path, progress: Progress) -> Job:
        archive, _ = _code.pack(code_dir)
        try:
            total = archive.stat().st_size
            report = _progress_reporter(progress, "uploading code")
            with open(archive, "rb") as f:
                body: Any = f if report is None else _ProgressFile(f, total, report)
                files = {
                    "spec": ("job.yaml", spec_text.encode(), "application/yaml"),
                    "code": ("code.zip", body, "application/zip"),
                }
                data = self._request("POST", "/api/v1/jobs", files=files, timeout=_UPLOAD_TIMEOUT)
        finally:
            archive.unlink()
        return self._job(data)

    def _submit_forge(self, forge: str, spec_text: str, code_dir: Path) -> Job:
        env = dict(os.environ, FORGE_SERVER=self.server, FORGE_TOKEN=self.token)
        with tempfile.TemporaryDirectory(prefix="starforge-submit-") as tmp:
            job_file = Path(tmp) / "job.yaml"
            job_file.write_text(spec_text, encoding="utf-8")
            p = subprocess.run(
                [forge, "submit", str(job_file), "--code", str(code_dir), "-o", "json"],
                env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            )
        if p.returncode != 0:
            # The CLI prints the API's message but not its error kind: a refused JobSpec is
            # asked about again through the API (POST /api/v1/uploads checks the JobSpec and
            # admits it before any code, docs/api.md), which answers with the kind and fields.
            try:
                self._request("POST", "/api/v1/uploads", content=spec_text.encode(),
                              headers={"Content-Type": "application/yaml"})
            except StarForgeError as e:
                if e.status is not None and e.status not in (404, 405, 429, 503):
                    raise e from None
            lines = [x for x in p.stderr.splitlines() if x.strip()]
            raise StarForgeError(
                "SubmitFailed", "forge submit: " + ("\n".join(lines[-5:]) or f"exit {p.returncode}")
            )
        return self._job(json.loads(p.stdout))

    def _wait_job(self, job: Job, timeout: Optional[float], poll: float) -> Job:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job.refresh()
            if job.done:
                return job
            if deadline is not None and time.monotonic() >= deadline:
                raise StarForgeError(
                    "Timeout", f"job {job.id} is still {job.phase} after {timeout} s"
                )
            left = None if deadline is None else deadline - time.monotonic()
            time.sleep(poll if left is None else max(0.0, min(poll, left)))

    def _job_logs(self, job: Job, follow: bool, tail: Optional[int], file: Optional[str]) -> Any:
        params: Dict[str, Any] = {}
        if tail is not None:
            params["tail"] = tail
        if file is not None:
            params["file"] = file
        if not follow:
            return self._send("GET", f"/api/v1/jobs/{job.id}/logs", params=params).text
        return self._follow(job, params)

    def _follow(self, job: Job, params: Dict[str, Any]) -> Iterator[str]:
        offset: Optional[str] = None
        failures = 0
        while True:
            q = dict(params, follow=1)
            if offset is not None:
                q.pop("tail", None)
                q["offset"] = offset
            try:
                with self._http.stream(
                    "GET", f"/api/v1/jobs/{job.id}/logs", params=q, timeout=_STREAM_TIMEOUT
                ) as r:
                    if r.status_code >= 400:
                        r.read()
                        self._raise_for(r)
                    for ev in _sse(r.iter_lines()):
                        failures = 0
                        if ev["event"] == "log":
                            if ev["id"] is not None:
                                offset = ev["id"]
                            yield from ev["data"].split("\n")
                        elif ev["event"] == "end":
                            job.log_end = from_wire(LogEnd, json.loads(ev["data"]))
                            return
            except (httpx.TransportError, httpx.StreamError):
                pass
            # Closed without `end` (the server stopped, the network): resume where it was.
            failures += 1
            if failures > 5:
                raise StarForgeError("Connection", f"the log stream of {job.id} keeps closing")
            time.sleep(min(0.2 * 2**failures, 5.0))

    def _job_events(self, job_id: str) -> List[Event]:
        items = self._request("GET", f"/api/v1/jobs/{job_id}/events")["items"]
        return [from_wire(Event, e) for e in items]

    def _cancel(self, job_id: str) -> Job:
        return self._job(self._request("POST", f"/api/v1/jobs/{job_id}/cancel"))

    def _artifacts(self, job_id: str) -> List[Artifact]:
        items = self._request("GET", f"/api/v1/jobs/{job_id}/artifacts")["items"]
        return [from_wire(Artifact, a) for a in items]

    # -- playgrounds -----------------------------------------------------------------------
    def playgrounds(self) -> List[Playground]:
        return self.playground.list()

    def _pg_call(self, method: str, pid: str, suffix: str, body: Any = None) -> Playground:
        kw = {} if body is None else {"json": body}
        return self._playground(self._request(method, f"/api/v1/playgrounds/{pid}{suffix}", **kw))

    def _pg_logs(self, pid: str, tail_lines: Optional[int]) -> str:
        params = {} if tail_lines is None else {"tailLines": tail_lines}
        return self._send("GET", f"/api/v1/playgrounds/{pid}/logs", params=params).text

    def _pg_events(self, pid: str) -> List[Dict[str, Any]]:
        return list(self._request("GET", f"/api/v1/playgrounds/{pid}/events")["items"])

    def _wait_playground(self, pg: Playground, timeout: Optional[float], poll: float) -> Playground:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            pg.refresh()
            if pg.state == "Ready":
                return pg
            if pg.ended:
                raise StarForgeError(
                    "PlaygroundEnded", f"playground {pg.id} is {pg.state}: {pg.reason} {pg.message}"
                )
            if deadline is not None and time.monotonic() >= deadline:
                raise StarForgeError(
                    "Timeout", f"playground {pg.id} is still {pg.state} after {timeout} s"
                )
            left = None if deadline is None else deadline - time.monotonic()
            time.sleep(poll if left is None else max(0.0, min(poll, left)))


def _read_spec(spec: SpecLike):  # -> (dict or None, text, base dir)
    if isinstance(spec, (str, os.PathLike)):
        path = Path(spec)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise StarForgeError("Code", f"cannot read the JobSpec {path}: {e.strerror}") from None
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        return (parsed if isinstance(parsed, dict) else None), text, path.parent
    if isinstance(spec, Mapping):
        data = dict(spec)
    elif hasattr(spec, "to_dict"):
        data = spec.to_dict()
    else:
        import dataclasses

        if not dataclasses.is_dataclass(spec):
            raise TypeError("spec: a path, a dict, or an object with to_dict()")
        data = {k: v for k, v in dataclasses.asdict(spec).items() if v is not None}
    return data, json.dumps(data), Path.cwd()


_CODE_LINE = re.compile(r"""^code:\s*(?:"([^"]*)"|'([^']*)'|([^#\s][^#]*?))\s*(?:#.*)?$""", re.M)


def _code_dir(code: Any, spec: Optional[Dict[str, Any]], text: str, base: Path) -> Path:
    if code is not None:
        return Path(code)
    value: Optional[str] = None
    if spec is not None:
        v = spec.get("code")
        value = v if isinstance(v, str) and v else None
    else:  # YAML: its top-level `code:` line (the SDK reads no YAML)
        m = _CODE_LINE.search(text)
        if m:
            value = next(g for g in m.groups() if g is not None)
    if not value:
        raise StarForgeError(
            "Code", "no code directory: pass code=DIR or set code: in the JobSpec"
        )
    p = Path(value)
    return p if p.is_absolute() else base / p
