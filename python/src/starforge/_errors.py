"""The one exception the SDK raises for what the API (or the client's setup) refuses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional


@dataclass(frozen=True)
class FieldError:
    """One problem of a request, at a JSON path (``pools[0].gpusPerMachine``)."""

    field: str
    message: str


class StarForgeError(Exception):
    """An error answer of the API (docs/api.md, "Errors"), or a client-side failure.

    ``code`` is the API's ``error`` kind (``Invalid``, ``NotFound``, ``Rejected`` …) or, for
    failures that never reached the API, one of ``Config``, ``Connection``, ``Code``,
    ``Timeout``, ``SubmitFailed``. ``status`` is the HTTP status (``None`` when there was none).
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: Optional[int] = None,
        field: Optional[str] = None,
        errors: Optional[List[FieldError]] = None,
    ) -> None:
        self.code = code
        self.message = message
        self.status = status
        self.field = field
        self.errors: List[FieldError] = list(errors or [])
        super().__init__(self._text())

    def _text(self) -> str:
        head = f"{self.status} {self.code}" if self.status else self.code
        text = f"{head}: {self.message}"
        if self.field:
            text += f" (field {self.field})"
        for e in self.errors:
            text += f"\n  {e.field}: {e.message}"
        return text

    @classmethod
    def from_response(cls, status: int, body: Any, fallback: str) -> "StarForgeError":
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            errors = [
                FieldError(str(e.get("field", "")), str(e.get("message", "")))
                for e in body.get("errors") or []
                if isinstance(e, dict)
            ]
            return cls(
                body["error"],
                str(body.get("message", "")),
                status=status,
                field=body.get("field") or None,
                errors=errors,
            )
        return cls("HTTP", fallback, status=status)
