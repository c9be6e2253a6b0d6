"""openapi/openapi.yaml: a valid OpenAPI document, in step with lib/errors.tsv and the contract's
routes. test_contract.py checks the live server against it (schemathesis, all checks)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from servicekit import ROOT, missing_binaries, registry

SPEC = ROOT / "openapi" / "openapi.yaml"
# docs/service-contract.md, "Routes"
CONTRACT_ROUTES = {
    ("post", "/v1/tasks"),
    ("get", "/v1/tasks"),
    ("get", "/v1/tasks/{}"),
    ("post", "/v1/evaluations"),
    ("get", "/v1/evaluations/{}"),
    ("get", "/v1/jobs/{}"),
    ("post", "/v1/jobs/{}/cancel"),
    ("get", "/v1/jobs/{}/events"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
    ("post", "/v1/optimize"),
    ("get", "/v1/episodes/{}"),
    ("post", "/v1/episodes/{}/publish"),
    ("get", "/v1/candidates/{}"),
    ("get", "/v1/candidates/{}/download"),
    ("get", "/v1/export"),
    ("get", "/v1/leaderboard"),
}


def _spec() -> dict[str, Any]:
    if not SPEC.exists():
        if missing_binaries():
            pytest.skip("openapi/openapi.yaml is not written yet")
        pytest.fail("the service is built but openapi/openapi.yaml does not exist")
    return yaml.safe_load(SPEC.read_text())


def _resolve(spec: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """Follows local $refs ("#/components/schemas/X")."""
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), ref
        node = spec
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def test_spec_is_valid() -> None:
    from openapi_spec_validator import validate

    validate(_spec())


def _error_object(spec: dict[str, Any]) -> dict[str, Any]:
    """The object inside {"error": {...}} of the Error schema."""
    schemas = spec["components"]["schemas"]
    assert "Error" in schemas, sorted(schemas)
    err = _resolve(spec, schemas["Error"])
    inner = err.get("properties", {}).get("error")
    assert inner is not None, f"Error has no property 'error': {err}"
    return _resolve(spec, inner)


def test_error_names_match_registry() -> None:
    spec = _spec()
    reg = registry()
    inner = _error_object(spec)
    name = _resolve(spec, inner["properties"]["name"])
    assert "enum" in name, f"the Error schema's name has no enum: {name}"
    assert sorted(name["enum"]) == sorted(reg), (
        f"in errors.tsv, not in the spec: {sorted(set(reg) - set(name['enum']))}; "
        f"in the spec, not in errors.tsv: {sorted(set(name['enum']) - set(reg))}"
    )
    code = _resolve(spec, inner["properties"]["code"])
    if "enum" in code:
        assert sorted(code["enum"]) == sorted(c for c, _ in reg.values())
    # a name -> code table where the spec has one (an x- extension or a "code name" list in the
    # description): each pair as in the registry
    for holder in (name, code):
        for key, value in holder.items():
            if key.startswith("x-") and isinstance(value, dict):
                for n, c in value.items():
                    if n in reg:
                        assert int(c) == reg[n][0], (key, n, c)
        for c, n in re.findall(r"\b([1-5]\d{3})\b\W+([a-z_]+)", holder.get("description", "")):
            if n in reg:
                assert int(c) == reg[n][0], (n, c)


def test_contract_routes_in_spec() -> None:
    spec = _spec()
    have = set()
    for path, item in spec["paths"].items():
        norm = re.sub(r"\{[^}]+\}", "{}", path)
        for method in item:
            if method in ("get", "post", "put", "patch", "delete", "head", "options"):
                have.add((method, norm))
    missing = CONTRACT_ROUTES - have
    assert not missing, f"routes of the contract missing from the spec: {sorted(missing)}"
