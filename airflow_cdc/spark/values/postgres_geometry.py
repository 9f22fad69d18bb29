"""PostgreSQL's built-in geometric types, from Debezium's values back to their text input:
``point`` (a Point struct {x, y}), ``box``, ``lseg``, ``path`` and ``polygon`` (a Geometry
struct holding WKB), ``circle`` ({center, radius}) and ``line`` ({a, b, c}).

The inverse of the engine's ``airflow_cdc/engine/sources/postgres/geometry.py``."""

from __future__ import annotations

import math
import struct
from typing import Any

from airflow_cdc.spark.values.semantic_types import base64, json_object


def _coordinate(value: Any) -> str:
    """A Java double as JSON (number, or 'NaN' / 'Infinity' / '-Infinity') -> float8 input."""
    if isinstance(value, str):
        if value in ("NaN", "Infinity", "-Infinity"):
            return value
        raise ValueError(f"not a coordinate: {value!r}")
    return _float_text(float(value))


def _float_text(value: float) -> str:
    if math.isfinite(value):
        return repr(value)
    return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")


def _wkb_points(encoded: str) -> list[str]:
    """A WKB line string's or single-ring polygon's points, as '(x,y)' texts."""
    raw = base64(encoded)
    order = "<" if raw[0] == 1 else ">"
    kind, offset = struct.unpack_from(order + "I", raw, 1)[0], 5
    if kind == 3:
        (rings,) = struct.unpack_from(order + "I", raw, offset)
        if rings != 1:
            raise ValueError(f"a WKB polygon of {rings} rings")
        offset += 4
    elif kind != 2:
        raise ValueError(f"WKB geometry type {kind}, not a line string or polygon")
    (count,) = struct.unpack_from(order + "I", raw, offset)
    values = struct.unpack_from(f"{order}{2 * count}d", raw, offset + 4)
    return [f"({_float_text(x)},{_float_text(y)})" for x, y in zip(values[0::2], values[1::2], strict=True)]


def point(text: str) -> str:
    value = json_object(text)
    return f"({_coordinate(value['x'])},{_coordinate(value['y'])})"


def box(text: str) -> str:
    ring = _wkb_points(json_object(text)["wkb"])  # (x1,y1), (x1,y2), (x2,y2), (x2,y1), (x1,y1)
    return f"{ring[0]},{ring[2]}"


def lseg(text: str) -> str:
    return "[" + ",".join(_wkb_points(json_object(text)["wkb"])) + "]"


def path(text: str) -> str:
    value = json_object(text)
    points = ",".join(_wkb_points(value["wkb"]))
    closed = (value.get("extensions") or {}).get("closed") == "true"
    return f"({points})" if closed else f"[{points}]"


def polygon(text: str) -> str:
    """Debezium closes the ring (appends the first point): drop that repeat."""
    ring = _wkb_points(json_object(text)["wkb"])
    if len(ring) >= 3 and ring[0] == ring[-1]:
        ring.pop()
    return "(" + ",".join(ring) + ")"


def circle(text: str) -> str:
    value = json_object(text)
    center = value["center"]
    return f"<({_coordinate(center['x'])},{_coordinate(center['y'])}),{_coordinate(value['radius'])}>"


def line(text: str) -> str:
    value = json_object(text)
    return "{" + ",".join(_coordinate(value[k]) for k in ("a", "b", "c")) + "}"
