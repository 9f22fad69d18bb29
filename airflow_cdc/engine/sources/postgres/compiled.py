"""The stream's hot modules compiled with mypyc, when a build of exactly these sources exists.

The decoding path (pgoutput decoding, value conversion, change building) is pure, strict-typed
Python; mypyc compiles it to C extensions that run it about 1.5-2x faster (ADR 0033). The
compiled modules are optional: ``scripts/build_compiled`` writes them into ``_compiled/`` (not
committed) with a manifest of the sha256 of every source it compiled, and this finder loads them
only while every one of those sources is unchanged. One changed (or missing) source, and none
is loaded: compiled modules reach into each other's classes directly, so a mix of compiled and
pure modules is never safe, and a stale build must never run in place of edited code. Without a
build, a compiler, or with ``AIRFLOW_CDC_COMPILED=0``, the pure-Python modules run as always.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import logging
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

log = logging.getLogger(__name__)

PACKAGE = "airflow_cdc.engine.sources.postgres"
#: The hot modules, compiled together (in one mypyc group): the decoder, the converters it calls
#: per value, the change builder and its transactional subclass (a compiled class can only be
#: subclassed by a compiled one).
MODULES = ("pgoutput", "numeric", "temporal", "types", "changes", "transactions")
BUILD_DIR = Path(__file__).resolve().parent / "_compiled"
MANIFEST = "manifest.json"
#: Set to 0 (or false/no/off) to run the pure-Python modules even where a build exists.
ENV_VAR = "AIRFLOW_CDC_COMPILED"


def source_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def module_source(module: str) -> Path:
    return Path(__file__).resolve().parent / f"{module}.py"


class _CompiledFinder(importlib.abc.MetaPathFinder):
    """Finds the modules of a current build (``extensions``: module name -> extension file)."""

    def __init__(self, extensions: dict[str, Path]) -> None:
        self.extensions = extensions

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        extension = self.extensions.get(fullname)
        if extension is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(extension))
        return importlib.util.spec_from_file_location(fullname, extension, loader=loader)


def current_build(build_dir: Path = BUILD_DIR) -> dict[str, Path] | None:
    """The build's extension files by module name, or None when there is no build or any source
    it was made from has changed since."""
    try:
        manifest = json.loads((build_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    sources: dict[str, str] = manifest.get("sources", {})
    if sorted(sources) != sorted(MODULES) or manifest.get("python") != sys.implementation.cache_tag:
        return None
    for module, digest in sources.items():
        source = module_source(module)
        if not source.exists() or source_digest(source) != digest:
            log.warning("the compiled stream modules are stale (%s.py changed): running the pure-Python ones", module)
            return None
    extensions = {name: build_dir / file for name, file in manifest.get("extensions", {}).items()}
    if not all(path.exists() for path in extensions.values()):
        return None
    return extensions


def enabled() -> bool:
    return os.environ.get(ENV_VAR, "1").strip().lower() not in ("0", "false", "no", "off")


def install() -> bool:
    """Load the compiled modules from now on when a current build exists; whether it does.
    Called by the package before any of them is imported."""
    if not enabled() or any(isinstance(f, _CompiledFinder) for f in sys.meta_path):
        return False
    extensions = current_build()
    if extensions is None:
        return False
    sys.meta_path.insert(0, _CompiledFinder(extensions))
    return True


def active() -> bool:
    """Whether the hot modules running are the compiled ones."""
    pgoutput = sys.modules.get(f"{PACKAGE}.pgoutput")
    return pgoutput is not None and not str(getattr(pgoutput, "__file__", "")).endswith(".py")
