"""Failed requests as Kubernetes ``Status`` objects, with the errors the fake raises often."""

from __future__ import annotations

from typing import Any

from tests.fakes.kube.resources import JsonObj, ResourceType


class ApiError(Exception):
    """A failed request, rendered as a Kubernetes ``Status`` object."""

    def __init__(
        self, code: int, reason: str, message: str, details: JsonObj | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details or {}

    def status(self) -> JsonObj:
        """Return the ``Status`` body the real API server would send."""
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "details": self.details,
            "code": self.code,
        }


def no_such_path() -> ApiError:
    """404 for a URL that names no group, version, resource or subresource the fake serves."""
    return ApiError(404, "NotFound", "the server could not find the requested resource")


def method_not_allowed() -> ApiError:
    """405 for a verb the URL does not accept."""
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method")


def require_object(body: Any) -> JsonObj:
    """Return ``body`` if it is a JSON object, else raise the 400 the real server sends."""
    if not isinstance(body, dict):
        raise ApiError(400, "BadRequest", "the body of the request was in an unknown format")
    return body


def _details(rtype: ResourceType, name: str) -> JsonObj:
    return {"name": name, "group": rtype.group, "kind": rtype.plural}


def not_found(rtype: ResourceType, name: str) -> ApiError:
    """404 for an object that does not exist."""
    return ApiError(404, "NotFound", f'{rtype.qualified} "{name}" not found', _details(rtype, name))


def already_exists(rtype: ResourceType, name: str) -> ApiError:
    """409 for a create whose name is taken."""
    return ApiError(
        409, "AlreadyExists", f'{rtype.qualified} "{name}" already exists', _details(rtype, name)
    )


def require_fresh(
    current: JsonObj, sent: JsonObj, rtype: ResourceType | None = None, name: str = ""
) -> None:
    """Raise 409 Conflict if ``sent`` carries a ``resourceVersion`` other than the stored one.

    Without ``rtype`` the message names no object, as for a merge patch's precondition.
    """
    sent_rv = str((sent.get("metadata") or {}).get("resourceVersion") or "")
    if not sent_rv or sent_rv == current["metadata"]["resourceVersion"]:
        return
    on = f' on {rtype.qualified} "{name}"' if rtype else ""
    raise ApiError(
        409,
        "Conflict",
        f"Operation cannot be fulfilled{on}: the object has been modified; please apply your "
        "changes to the latest version and try again",
        _details(rtype, name) if rtype else None,
    )
