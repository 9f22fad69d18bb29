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
        "description": "One engine instance. The /connectors routes mirror Kafka Connect's REST API.",
    },
    "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    "security": [{"bearer": []}],
    "paths": {
        "/health": {"get": _op("Liveness", public=True)},
        "/openapi.json": {"get": _op("This document", public=True)},
        "/status": {"get": _op("State, tasks, committed positions, lag, counters, sink")},
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
                "summary": "Notifications after a cursor: ?since=<cursor>&limit=<n> -> {notifications, cursor}",
                "parameters": [
                    {"name": "since", "in": "query", "schema": {"type": "integer", "default": 0}},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "default": 1000}},
                ],
                "responses": {"200": {"description": "OK"}, "401": {"description": "missing or wrong bearer token"}},
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
