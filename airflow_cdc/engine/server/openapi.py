"""The control API's OpenAPI document (served at ``/openapi.json``)."""

from __future__ import annotations

from typing import Any


def _op(summary: str, response: str = "OK", *, public: bool = False) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": summary,
        "responses": {"200": {"description": response}, "401": {"description": "missing or wrong bearer token"}},
    }
    if public:
        operation["security"] = []
        del operation["responses"]["401"]
    return operation


_ACCEPTED = {"202": {"description": "requested"}, "401": {"description": "missing or wrong bearer token"}}

_CONFLICT = {"409": {"description": "the instance is running"}}

OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "airflow-cdc engine instance control API",
        "version": "1",
        "description": "One engine instance. The /connectors routes mirror Kafka Connect's REST API. "
        'Errors are {"error_code", "message"}.',
    },
    "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    "security": [{"bearer": []}],
    "paths": {
        "/health": {"get": _op("Liveness", public=True)},
        "/openapi.json": {"get": _op("This document", public=True)},
        "/status": {
            "get": _op(
                "InstanceStatus (server/models.py): run_id, state, phase (starting, snapshotting, streaming, "
                "finished, stopped, failed), position, tasks' counters, sink, error"
            )
        },
        "/position": {
            "get": {
                "summary": "InstancePosition: phase, committed and current positions and lag per task, caught_up; "
                "with ?target=<position> (e.g. an LSN 0/16B3748) whether every task has reached it",
                "parameters": [{"name": "target", "in": "query", "schema": {"type": "string"}}],
                "responses": {
                    "200": {"description": "OK"},
                    "400": {"description": "target is not a position of this source"},
                    "401": {"description": "missing or wrong bearer token"},
                },
            }
        },
        "/offsets": {"get": _op("Committed offsets: {offsets: [{partition, offset}]}")},
        "/metrics": {"get": _op("Prometheus metrics (text exposition format)")},
        "/stop": {"post": {"summary": "Stop the instance gracefully", "responses": _ACCEPTED}},
        "/pause": {
            "post": {"summary": "Stop polling the source; deliveries and commits go on", "responses": _ACCEPTED}
        },
        "/resume": {"post": {"summary": "Poll the source again", "responses": _ACCEPTED}},
        "/connectors/{name}/pause": {"put": {"summary": "Kafka Connect: pause", "responses": _ACCEPTED}},
        "/connectors/{name}/resume": {"put": {"summary": "Kafka Connect: resume", "responses": _ACCEPTED}},
        "/signals": {
            "post": {
                "summary": "Send a signal (Debezium's shape): {id?, type, data}",
                "requestBody": {
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["type"],
                                "properties": {
                                    "id": {"type": "string"},
                                    "type": {
                                        "enum": [
                                            "execute-snapshot",
                                            "stop-snapshot",
                                            "pause-snapshot",
                                            "resume-snapshot",
                                            "log",
                                        ]
                                    },
                                    "data": {"type": "object"},
                                },
                            }
                        }
                    }
                },
                "responses": {
                    "202": {"description": "queued: {id}"},
                    "400": {"description": "a malformed signal, with the problem"},
                    "401": {"description": "missing or wrong bearer token"},
                },
            }
        },
        "/notifications": {
            "get": {
                "summary": "Notifications after a cursor: ?cursor=<run id>:<seq>&limit=<n> -> "
                "{run_id, cursor, notifications, reset}. A cursor of an earlier run gets the rest of that run "
                "and everything since; an unknown one gets everything kept, with reset=true",
                "parameters": [
                    {"name": "cursor", "in": "query", "schema": {"type": "string"}},
                    {"name": "since", "in": "query", "schema": {"type": "string"}, "description": "cursor's old name"},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "default": 1000, "minimum": 1}},
                ],
                "responses": {
                    "200": {"description": "OK"},
                    "400": {"description": "limit is not a positive integer"},
                    "401": {"description": "missing or wrong bearer token"},
                },
            }
        },
        "/connectors": {"get": _op("Kafka Connect: the connector names (one)")},
        "/connectors/{name}": {"get": _op("Kafka Connect: name, type, config, tasks")},
        "/connectors/{name}/status": {"get": _op("Kafka Connect: connector and task states")},
        "/connectors/{name}/offsets": {
            "get": _op("Kafka Connect (KIP-875): committed offsets"),
            "patch": {"summary": "Refused (409) while running: use airflow-cdc offsets set", "responses": _CONFLICT},
            "delete": {"summary": "Refused (409) while running: use airflow-cdc offsets reset", "responses": _CONFLICT},
        },
        "/connectors/{name}/stop": {"put": {"summary": "Kafka Connect: stop", "responses": _ACCEPTED}},
    },
}
