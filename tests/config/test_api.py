"""The assembled JSON API and its OpenAPI document."""

from __future__ import annotations


def test_openapi_document_lists_the_gate(client):
    doc = client.get("/api/v1/openapi.json")
    assert doc.status_code == 200
    paths = doc.json()["paths"]
    assert "/api/v1/check" in paths and "post" in paths["/api/v1/check"]
    assert "/api/v1/servers/{name}/snapshots" in paths
    assert doc.json()["components"]["securitySchemes"]
