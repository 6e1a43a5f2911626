"""``201 Created`` with a ``Location`` (RFC 9110 §10.2.2): where a created resource can be read back.

A route that creates something its API can ``GET`` by id takes ``located("get_bot")`` into its ``responses``
(so the OpenAPI document declares the header) and calls :func:`locate` with the new id.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import Request, Response


def located(reader: str) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI entry of a 201 that carries a ``Location`` (the path the ``reader`` operation answers)."""
    return {
        201: {
            "description": "Created",
            "headers": {
                "Location": {
                    "description": f"The path of the new resource (what {reader} reads)",
                    "required": True,
                    "schema": {"type": "string"},
                }
            },
        }
    }


def locate(request: Request, response: Response, reader: str, **path_params: str) -> None:
    """Set ``Location`` to the path the route named ``reader`` answers for the new resource."""
    response.headers["Location"] = request.url_for(reader, **path_params).path


def link_created(document: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI links from each create (a ``POST`` answering 201) to every operation on what it made: the get,
    update and delete of ``/things/{thing_id}`` and the operations under it with no other parameter
    (``/things/{thing_id}/generate``), the id at ``$response.body#/thing/id``. schemathesis' stateful phase follows
    them, so it reads, changes, deletes and uses real objects instead of guessing ids."""
    paths: dict[str, Any] = document.get("paths", {})
    for path, item in paths.items():
        created = item.get("post", {}).get("responses", {}).get("201")
        if created is None:
            continue
        for other, operations in paths.items():
            rest = other.removeprefix(path + "/{")
            param, _, below = rest.partition("}")
            if rest == other or not param.endswith("_id") or "/" in param or "{" in below:
                continue
            thing = param.removesuffix("_id")
            suffix = below.strip("/").replace("/", "_").replace("-", "_")
            links = created.setdefault("links", {})
            for method in ("get", "post", "put", "patch", "delete"):
                operation = operations.get(method)
                if operation is not None and "operationId" in operation:
                    links[f"{method}_{thing}" + (f"_{suffix}" if suffix else "")] = {
                        "operationId": operation["operationId"],
                        "parameters": {
                            **{p: f"$request.path.{p}" for p in re.findall(r"{(\w+)}", path)},
                            param: f"$response.body#/{thing}/id",
                        },
                    }
    return document
