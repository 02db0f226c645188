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
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.json_schema import models_json_schema

from reward_server import jsonsteps
from reward_server.errors import InvalidRequest, error, invalid
from sandbox.jobs import escape_surrogates

M = TypeVar("M", bound=BaseModel)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # only JSON escapes can carry one
_BODY_MODELS: dict[str, type[BaseModel]] = {}
_REF = "#/components/schemas/{model}"


_MAX_ERRORS = 20
_SMALL = 1 << 20  # bodies below this are decoded by json.loads in one call


def _decode(body: bytes, list_field: str | None, max_items: int | None) -> Any:
    if len(body) < _SMALL:
        return json.loads(body)
    return jsonsteps.loads(body.decode("utf-8"), list_field, max_items)


def _validate(obj: Any, model: type[M], list_field: str | None, element: TypeAdapter | None) -> M:
    """`model.model_validate(obj)`; with `element`, the `list_field` list is validated one
    element per call (each call holds the interpreter lock only for its own element)."""
    seq = obj.get(list_field) if element is not None and isinstance(obj, dict) else None
    if not isinstance(seq, list):
        return model.model_validate(obj)
    errors: list[dict[str, Any]] = []
    try:
        rest = model.model_validate({**obj, list_field: []})
    except ValidationError as e:
        rest = None
        errors.extend(error(list(err["loc"]), err["msg"], err["type"]) for err in e.errors())
    out = []
    for i, x in enumerate(seq):
        try:
            out.append(element.validate_python(x))
        except ValidationError as e:
            errors.extend(error([list_field, i, *err["loc"]], err["msg"], err["type"]) for err in e.errors())
            if len(errors) >= _MAX_ERRORS:
                break
    if errors:
        raise InvalidRequest(errors)
    assert rest is not None
    return rest.model_copy(update={list_field: out})


def _parse(body: bytes, model: type[M], list_field: str | None, max_items: int | None, escape: bool,
           precheck: Callable[[Any], None] | None, element: TypeAdapter | None) -> M:
    try:
        obj = _decode(body, list_field, max_items)
    except jsonsteps.ListTooLong:
        raise invalid([list_field], f"at most {max_items} items per request, got more", "too_long") from None
    except RecursionError:
        raise invalid([], "body is nested too deeply", "json_invalid") from None
    except ValueError:  # JSONDecodeError, UnicodeDecodeError
        raise invalid([], "body is not valid JSON (UTF-8)", "json_invalid") from None
    if list_field is not None and max_items is not None and isinstance(obj, dict):
        seq = obj.get(list_field)
        if isinstance(seq, list) and len(seq) > max_items:
            raise invalid([list_field], f"at most {max_items} items per request, got {len(seq)}", "too_long")
    if precheck is not None:
        precheck(obj)
    if escape and _SURROGATE_ESCAPE.search(body):
        obj = escape_surrogates(obj)
    try:
        return _validate(obj, model, list_field, element)
    except ValidationError as e:
        raise InvalidRequest([error(list(err["loc"]), err["msg"], err["type"]) for err in e.errors()]) from None
    except RecursionError:
        raise invalid([], "body is nested too deeply", "json_invalid") from None


async def parse_body(
    request: Request, model: type[M], *, list_field: str | None = None, max_items: int | None = None,
    escape: bool = True, precheck: Callable[[Any], None] | None = None, element: TypeAdapter | None = None,
    inline_max: int = 0,
) -> M:
    """The body as `model`, or `InvalidRequest` (422 naming the field). `list_field` longer than
    `max_items` is refused before anything else is validated. With `escape`, lone surrogates
    anywhere in the body become backslash escapes (else the model's validators see them).
    `precheck(decoded JSON)` may refuse more before validation (raise InvalidRequest);
    `element` validates the `list_field` list one element at a time. A body of at most
    `inline_max` bytes is parsed on the event loop (for a small, flat model the thread hop costs
    more than the parse: a session execute's cell)."""
    body = await request.body()
    if len(body) <= inline_max:
        return _parse(body, model, list_field, max_items, escape, precheck, element)
    return await asyncio.to_thread(_parse, body, model, list_field, max_items, escape, precheck, element)


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
