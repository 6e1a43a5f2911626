"""``201 Created`` with a ``Location`` (RFC 9110 §10.2.2): where a created resource can be read back.

A route that creates something its API can ``GET`` by id takes ``located("get_bot")`` into its ``responses``
(so the OpenAPI document declares the header) and calls :func:`locate` with the new id.
"""

from __future__ import annotations

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
