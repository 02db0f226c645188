"""Request bodies parsed and validated off the event loop, with the item cap applied first.

FastAPI parses and validates a declared body in the event loop, before the route runs: a
200 000-item body held every connection (health checks included) for seconds before its
item count was even looked at. Routes here take the raw `Request` and call `parse_body`,
which in a worker thread decodes the JSON, refuses an over-long item list by its length,
escapes lone surrogates (JSON's `"\\ud800"`) so that no string the server holds is invalid
Unicode, then validates with the pydantic model. `request_body(model)` keeps the model in
the OpenAPI document (clients and the schema fuzzer read it from there).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ValidationError
from pydantic.json_schema import models_json_schema

from reward_server.errors import InvalidRequest, error, invalid
from sandbox.jobs import escape_surrogates

M = TypeVar("M", bound=BaseModel)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # only JSON escapes can carry one
_BODY_MODELS: dict[str, type[BaseModel]] = {}
_REF = "#/components/schemas/{model}"


_WS = " \t\n\r"
_DECODER = json.JSONDecoder()
_SMALL = 1 << 20  # bodies below this are decoded in one call


class _TooMany(Exception):
    pass


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _expect(text: str, i: int, ch: str) -> int:
    i = _skip(text, i)
    if i >= len(text) or text[i] != ch:
        raise ValueError(f"expected {ch!r} at {i}")
    return i + 1


def _list_in_steps(text: str, i: int, cap: int) -> tuple[list, int]:
    """A JSON array decoded one element per call, stopping once it holds more than `cap`."""
    i = _expect(text, i, "[")
    out: list = []
    i = _skip(text, i)
    if i < len(text) and text[i] == "]":
        return out, i + 1
    while True:
        v, i = _DECODER.raw_decode(text, _skip(text, i))
        out.append(v)
        if len(out) > cap:
            raise _TooMany
        i = _skip(text, i)
        if i < len(text) and text[i] == ",":
            i += 1
            continue
        return out, _expect(text, i, "]")


def _decode(body: bytes, list_field: str | None, max_items: int | None) -> Any:
    """`json.loads(body)`, but a large object's `list_field` array is decoded one element at
    a time: one C call never holds the GIL for the whole body (the event loop would stall
    with it), and an over-long list is refused after `max_items + 1` elements."""
    if len(body) < _SMALL or list_field is None or max_items is None:
        return json.loads(body)
    text = body.decode("utf-8")
    i = _skip(text, 0)
    if not text.startswith("{", i):
        return json.loads(text)
    obj: dict[str, Any] = {}
    i = _skip(text, i + 1)
    if text.startswith("}", i):
        i += 1
    else:
        while True:
            key, i = _DECODER.raw_decode(text, _skip(text, i))
            if not isinstance(key, str):
                raise ValueError("object keys must be strings")
            i = _expect(text, i, ":")
            i = _skip(text, i)
            if key == list_field and text.startswith("[", i):
                obj[key], i = _list_in_steps(text, i, max_items)
            else:
                obj[key], i = _DECODER.raw_decode(text, i)
            i = _skip(text, i)
            if text.startswith(",", i):
                i += 1
                continue
            i = _expect(text, i, "}")
            break
    if _skip(text, i) != len(text):
        raise ValueError("extra data after the JSON value")
    return obj


def _parse(body: bytes, model: type[M], list_field: str | None, max_items: int | None, escape: bool) -> M:
    try:
        obj = _decode(body, list_field, max_items)
    except _TooMany:
        raise invalid([list_field], f"at most {max_items} items per request, got more", "too_long") from None
    except RecursionError:
        raise invalid([], "body is nested too deeply", "json_invalid") from None
    except ValueError:  # JSONDecodeError, UnicodeDecodeError
        raise invalid([], "body is not valid JSON (UTF-8)", "json_invalid") from None
    if list_field is not None and max_items is not None and isinstance(obj, dict):
        seq = obj.get(list_field)
        if isinstance(seq, list) and len(seq) > max_items:
            raise invalid([list_field], f"at most {max_items} items per request, got {len(seq)}", "too_long")
    if escape and _SURROGATE_ESCAPE.search(body):
        obj = escape_surrogates(obj)
    try:
        return model.model_validate(obj)
    except ValidationError as e:
        raise InvalidRequest([error(list(err["loc"]), err["msg"], err["type"]) for err in e.errors()]) from None
    except RecursionError:
        raise invalid([], "body is nested too deeply", "json_invalid") from None


async def parse_body(
    request: Request, model: type[M], *, list_field: str | None = None, max_items: int | None = None,
    escape: bool = True,
) -> M:
    """The body as `model`, or `InvalidRequest` (422 naming the field). `list_field` longer than
    `max_items` is refused before anything else is validated. With `escape`, lone surrogates
    anywhere in the body become backslash escapes (else the model's validators see them)."""
    body = await request.body()
    return await asyncio.to_thread(_parse, body, model, list_field, max_items, escape)


def request_body(model: type[BaseModel]) -> dict[str, Any]:
    """`openapi_extra` for a route that parses `model` itself."""
    _BODY_MODELS[model.__name__] = model
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": {"$ref": _REF.format(model=model.__name__)}}}}}


def install_openapi(app: FastAPI) -> None:
    """The app's OpenAPI document with the body models of `request_body` routes in it."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        _, defs = models_json_schema([(m, "validation") for m in _BODY_MODELS.values()], ref_template=_REF)
        comps = schema.setdefault("components", {}).setdefault("schemas", {})
        for name, s in defs.get("$defs", {}).items():
            comps.setdefault(name, s)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
