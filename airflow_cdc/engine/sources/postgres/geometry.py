"""PostgreSQL's geometric types -> Debezium 3.7's values.

``point`` is ``io.debezium.data.geometry.Point`` ({x, y, wkb, srid}); ``box``, ``lseg``, ``path``
and ``polygon`` are ``Geometry`` ({wkb, srid, extensions}) whose WKB (little-endian, as
``WkbWriter``) is a polygon ring or a line string and whose extensions name the PostgreSQL type;
``circle`` is ``Circle`` ({center: Point, radius}) and ``line`` is ``Line`` ({a, b, c}).
Coordinates are Java doubles: NaN and the infinities become the strings Jackson writes.
"""

from __future__ import annotations

import math
import re
import struct
from binascii import b2a_base64
from collections.abc import Callable
from typing import Any

_WKB_POINT, _WKB_LINE_STRING, _WKB_POLYGON = 1, 2, 3
_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?|NaN|Infinity)")

Coordinates = list[tuple[float, float]]


def json_double(value: float) -> Any:
    """A Java double as Kafka Connect's JSON converter writes it."""
    if math.isfinite(value):
        return value
    return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")


def _numbers(text: str) -> list[float]:
    return [float(n) for n in _NUMBER.findall(text)]


def _pairs(text: str) -> Coordinates:
    numbers = _numbers(text)
    return list(zip(numbers[0::2], numbers[1::2], strict=True))


def _b64(raw: bytes) -> str:
    return b2a_base64(raw, newline=False).decode("ascii")


def _wkb_point(x: float, y: float) -> bytes:
    return struct.pack("<BIdd", 1, _WKB_POINT, x, y)


def _wkb_line_string(points: Coordinates) -> bytes:
    return struct.pack("<BII", 1, _WKB_LINE_STRING, len(points)) + b"".join(struct.pack("<dd", *p) for p in points)


def _wkb_polygon(ring: Coordinates) -> bytes:
    head = struct.pack("<BIII", 1, _WKB_POLYGON, 1, len(ring))
    return head + b"".join(struct.pack("<dd", *p) for p in ring)


def point_value(x: float, y: float) -> dict[str, Any]:
    return {"x": json_double(x), "y": json_double(y), "wkb": _b64(_wkb_point(x, y)), "srid": None}


def _geometry(wkb: bytes, extensions: dict[str, str]) -> dict[str, Any]:
    return {"wkb": _b64(wkb), "srid": None, "extensions": extensions}


def point(text: str) -> dict[str, Any]:
    x, y = _numbers(text)
    return point_value(x, y)


def box(text: str) -> dict[str, Any]:
    """PostgreSQL prints the upper-right corner first; Debezium's ring starts there and goes
    (x1,y1), (x1,y2), (x2,y2), (x2,y1), (x1,y1)."""
    (x1, y1), (x2, y2) = _pairs(text)
    ring = [(x1, y1), (x1, y2), (x2, y2), (x2, y1), (x1, y1)]
    return _geometry(_wkb_polygon(ring), {"type": "box"})


def lseg(text: str) -> dict[str, Any]:
    return _geometry(_wkb_line_string(_pairs(text)), {"type": "lseg"})


def path(text: str) -> dict[str, Any]:
    """'[...]' is an open path, '(...)' a closed one; WKB cannot tell, the extensions do."""
    closed = "false" if text.startswith("[") else "true"
    return _geometry(_wkb_line_string(_pairs(text)), {"type": "path", "closed": closed})


def polygon(text: str) -> dict[str, Any]:
    ring = _pairs(text)
    if len(ring) >= 2 and ring[0] != ring[-1]:  # closeRing: only a ring of two or more points
        ring.append(ring[0])
    return _geometry(_wkb_polygon(ring), {"type": "polygon"})


def circle(text: str) -> dict[str, Any]:
    x, y, radius = _numbers(text)
    return {"center": point_value(x, y), "radius": json_double(radius)}


def line(text: str) -> dict[str, Any]:
    a, b, c = _numbers(text)
    return {"a": json_double(a), "b": json_double(b), "c": json_double(c)}


CONVERTERS: dict[str, Callable[[str], Any]] = {
    "point": point,
    "box": box,
    "lseg": lseg,
    "path": path,
    "polygon": polygon,
    "circle": circle,
    "line": line,
}

#: What Debezium emits for a NOT NULL geometric column without a value (the fallbacks of
#: PostgresValueConverter: small valid shapes, and the y = 0 axis for a line).
FALLBACKS: dict[str, Any] = {
    "point": point_value(0.0, 0.0),
    "box": _geometry(_wkb_polygon([(0, 0), (0, 1), (1, 1), (1, 0), (0, 0)]), {"type": "box"}),
    "lseg": _geometry(_wkb_line_string([(0, 0), (1, 0)]), {"type": "lseg"}),
    "path": _geometry(_wkb_line_string([(0, 0), (1, 0)]), {"type": "path"}),
    "polygon": _geometry(_wkb_polygon([(0, 0), (1, 0), (0, 1), (0, 0)]), {"type": "polygon"}),
    "circle": {"center": point_value(0.0, 0.0), "radius": 0.0},
    "line": {"a": 0.0, "b": 1.0, "c": 0.0},
}
