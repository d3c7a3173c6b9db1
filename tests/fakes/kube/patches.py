"""PATCH bodies: JSON merge patch, strategic merge patch and JSON patch, chosen by Content-Type."""

from __future__ import annotations

import copy
from typing import Any

from tests.fakes.kube.errors import ApiError, require_fresh, require_object
from tests.fakes.kube.resources import JsonObj

JSON_PATCH = "application/json-patch+json"
MERGE_PATCHES = ("application/merge-patch+json", "application/strategic-merge-patch+json")


def _invalid(message: str) -> ApiError:
    return ApiError(422, "Invalid", message)


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 JSON merge patch (``null`` deletes, objects merge, the rest replaces)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _invalid(f"json patch path {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def json_patch(target: JsonObj, ops: Any) -> JsonObj:
    """Apply an RFC 6902 JSON patch (``add``, ``remove``, ``replace``, ``test``)."""
    if not isinstance(ops, list):
        raise ApiError(
            400,
            "BadRequest",
            "json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp",
        )
    doc: Any = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise _invalid(f"invalid json patch operation {op!r}")
        path = op["path"]
        parts = _pointer(str(path))
        if not parts:
            raise _invalid("json patch on the whole document is not supported")
        parent: Any = doc
        for p in parts[:-1]:
            try:
                parent = parent[int(p)] if isinstance(parent, list) else parent[p]
            except (KeyError, IndexError, ValueError) as exc:
                raise _invalid(f"json patch path {path!r} does not exist") from exc
        last = parts[-1]
        kind = op["op"]
        value = op.get("value")
        if isinstance(parent, list):
            idx = len(parent) if last == "-" else int(last)
            if kind == "add":
                parent.insert(idx, value)
            elif kind == "remove":
                parent.pop(idx)
            elif kind == "replace":
                parent[idx] = value
            elif kind == "test" and parent[idx] != value:
                raise _invalid(f"json patch test failed at {path!r}")
        elif isinstance(parent, dict):
            if kind in ("replace", "remove") and last not in parent:
                raise _invalid(f"json patch {kind} of missing path {path!r}")
            if kind in ("add", "replace"):
                parent[last] = value
            elif kind == "remove":
                del parent[last]
            elif kind == "test" and parent.get(last) != value:
                raise _invalid(f"json patch test failed at {path!r}")
        else:
            raise _invalid(f"json patch path {path!r} is not a container")
    if not isinstance(doc, dict):
        raise _invalid("json patch must leave an object")
    return doc


def apply_patch(content_type: str, current: JsonObj, body: Any) -> JsonObj:
    """Patch ``current`` with ``body`` as the request's ``Content-Type`` says (415 otherwise)."""
    ctype = content_type.split(";", maxsplit=1)[0].strip()
    if ctype == JSON_PATCH:
        return json_patch(current, body)
    if ctype in MERGE_PATCHES:
        # Strategic merge is treated as a merge patch: the resources served here have no
        # list fields that tritonguard patches by key.
        patch = require_object(body)
        patched = merge_patch(current, patch)
        require_fresh(current, patch)
        return dict(patched)
    raise ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{JSON_PATCH}, {', '.join(MERGE_PATCHES)} (got {ctype!r})",
    )
