"""Property-based fuzzing of the HTTP API from the server's own OpenAPI spec (Schemathesis,
live server on the bwrap host): no 5xx, responses conform to the declared schemas and
status codes. The server gets tight ceilings so that generated jobs stay cheap."""

from __future__ import annotations

import os

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.reliability.conftest import LONG  # noqa: E402
from tests.server.conftest import start_server  # noqa: E402

MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", 200 if LONG else 50))
CHECKS = [not_a_server_error, response_schema_conformance, status_code_conformance, content_type_conformance]


@pytest.fixture(scope="module")
def fuzz_server():
    s = start_server(sandbox="bwrap", pool_size=2, max_timeout_s=1.0, max_memory_mb=256, max_items_per_request=4,
                     max_code_bytes=4096, max_body_bytes=64 << 10, math_workers=1)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def api_schema(fuzz_server):
    return schemathesis.openapi.from_url(fuzz_server.url + "/openapi.json")


# Every operation the spec declares (a new route is fuzzed without touching this file).
OPERATIONS = ["POST /v1/score", "POST /run_code", "POST /get_reward", "GET /healthz", "GET /readyz", "GET /metrics",
              "POST /v1/sessions", "POST /v1/sessions/{session_id}/execute", "POST /execute"]


def test_spec_lists_the_fuzzed_operations(api_schema):
    labels = {r.ok().label for r in api_schema.get_all_operations()}
    assert set(OPERATIONS) <= labels, labels


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=lambda m: m.value)
@pytest.mark.parametrize("label", OPERATIONS)
def test_operation_conforms_to_its_openapi_spec(api_schema, fuzz_server, label, mode):
    """Positive cases (valid by the spec) and negative ones (invalid: must be a 4xx, never a 5xx)."""
    op = api_schema.find_operation_by_label(label)
    calls = {"n": 0}

    @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=op.as_strategy(generation_mode=mode))
    def fuzz(case):
        calls["n"] += 1
        case.call_and_validate(base_url=fuzz_server.url, checks=CHECKS, timeout=60)

    try:
        fuzz()
    except Unsatisfiable:
        if mode == GenerationMode.NEGATIVE and calls["n"] == 0:
            pytest.skip(f"{label} takes no input that could be invalid")
        raise
    assert calls["n"] >= 1


def test_undecodable_body_is_a_422_like_bad_json(fuzz_server):
    """Found by the fuzzer: a body that is not UTF-8 got FastAPI's bare 400, off the spec."""
    import httpx  # noqa: PLC0415

    for path in ("/v1/score", "/run_code", "/get_reward"):
        r = httpx.post(fuzz_server.url + path, content=b"\xff\xfe{", headers={"content-type": "application/json"})
        assert r.status_code == 422, (path, r.status_code, r.text)
        assert r.json()["detail"][0]["type"] == "json_invalid"
        r = httpx.post(fuzz_server.url + path, content=b"{not json", headers={"content-type": "application/json"})
        assert r.status_code == 422, (path, r.status_code, r.text)
    r = httpx.get(fuzz_server.url + "/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
