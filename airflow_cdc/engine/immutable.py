"""``@immutable``: a frozen dataclass to the type checker, a plain slotted one at run time.

A frozen dataclass sets every field through ``object.__setattr__`` when it is built: 0.93 µs
for a seven-field record here against 0.21 µs for the same class unfrozen. The engine builds a
record, its serialized form and a decoded message per change, so freezing at run time cost
about a fifth of the initial snapshot's time per row. mypy still reports any assignment to a
field (``dataclass_transform(frozen_default=True)``), which is where the guarantee is checked;
nothing in the engine hashes these objects, so the frozen ``__hash__`` is not missed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar, dataclass_transform

T = TypeVar("T")


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def immutable(cls: type[T]) -> type[T]:
    return dataclass(slots=True)(cls)
