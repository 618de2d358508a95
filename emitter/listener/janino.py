"""The one JVM boundary for our Java helpers: the `.java` files in `emitter/listener/java/`,
compiled together once per JVM with Janino (which Spark ships for its codegen) into one class
loader, and the one protocol for their large results.

py4j stalls ~44 ms on any string of 8 KB or more, so a helper returns a long result as
"@" + the path of a temp file holding it (`SparkLineageResult.of`); `read_result` reads and
removes that file. The compiled classes are kept per JVM for the life of the process (py4j
caches reflected methods by class name, so a class must not be compiled twice in one JVM).
"""

from __future__ import annotations

import logging
import os
import threading
from importlib import resources
from typing import Any

log = logging.getLogger(__name__)

JAVA_PACKAGE = "emitter.listener.java"
FILE_REFERENCE = "@"

_compiled: dict[int, Any] = {}  # id(gateway) -> class loader holding every helper class
_failed: dict[int, str] = {}  # id(gateway) -> why the helpers could not be compiled
_compile_lock = threading.Lock()


class HelperUnavailable(RuntimeError):
    """The Java helpers could not be compiled in this JVM (logged once when first found)."""


def java_source() -> str:
    """Every helper's source as one compilation unit (imports first, then each class)."""
    imports: dict[str, None] = {}
    bodies: list[str] = []
    for resource in sorted(resources.files(JAVA_PACKAGE).iterdir(), key=lambda entry: entry.name):
        if not resource.name.endswith(".java"):
            continue
        body: list[str] = []
        for line in resource.read_text(encoding="utf-8").splitlines():
            if line.startswith("import "):
                imports[line.strip()] = None
            elif not line.startswith("package "):
                body.append(line)
        bodies.append("\n".join(body))
    return "\n".join([*imports, *bodies])


def class_loader(gateway: Any) -> Any:
    """The class loader of the compiled helpers for this gateway's JVM (compiled on first use,
    ~1 s); HelperUnavailable when Janino is missing or the sources do not compile (tried once
    per JVM, the reason logged once as a warning)."""
    with _compile_lock:
        loader = _compiled.get(id(gateway))
        if loader is not None:
            return loader
        if id(gateway) in _failed:
            raise HelperUnavailable(_failed[id(gateway)])
        try:
            jvm = gateway.jvm
            compiler = jvm.org.codehaus.janino.SimpleCompiler()
            compiler.setParentClassLoader(jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader())
            compiler.cook(java_source())
            loader = compiler.getClassLoader()
        except Exception as error:
            _failed[id(gateway)] = str(error)
            log.warning(
                "OpenLineage: the Java helpers could not be compiled with Janino (%s): Spark actions are"
                " not captured, only the application and streaming runs are emitted",
                error,
            )
            raise HelperUnavailable(str(error)) from error
        _compiled[id(gateway)] = loader
        return loader


def new_instance(gateway: Any, class_name: str) -> Any:
    """A new instance of one helper class (py4j calls its methods directly)."""
    return class_loader(gateway).loadClass(class_name).newInstance()


def optional_instance(gateway: Any, class_name: str, without_it: str) -> Any | None:
    """`new_instance`, or None when the helpers cannot be had (`class_loader` logs why, once per
    JVM); what the listener does `without_it` is logged at debug level."""
    try:
        return new_instance(gateway, class_name)
    except Exception as error:  # noqa: BLE001 - the listeners capture less without the helper, never fail
        log.debug("Janino helper %s unavailable (%s); %s", class_name, error, without_it)
        return None


def read_result(result: str | None) -> str | None:
    """A helper's result: inline, or read (and removed) from the temp file it names."""
    if result is None or not result.startswith(FILE_REFERENCE):
        return result
    path = result[len(FILE_REFERENCE) :]
    try:
        with open(path, encoding="utf-8") as result_file:
            return result_file.read()
    finally:
        os.unlink(path)
