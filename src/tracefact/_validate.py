"""Checking `configure()`'s arguments at the call, so a wrong one fails there, by name.

A misspelt exporter or a string where an evaluator belongs would otherwise fail much
later, on another thread, or not at all (every span quietly unevaluated).
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

from tracefact.config import EXPORTER_NAMES, exporter_name_error
from tracefact.sampling import Sampler
from tracefact.scrubbing import ScrubbingOptions
from tracefact.sinks.base import ResultSink

_ATTACH = ("enrich", "span")


def validate_configure(arguments: Mapping[str, Any]) -> None:
    """Raise TypeError or ValueError naming the first wrong argument; None means unset."""
    for name, value in arguments.items():
        check = _CHECKS.get(name)
        if check is not None and value is not None:
            check(name, value)


def _type_error(name: str, expected: str, value: Any) -> TypeError:
    return TypeError(f"configure({name}=...) must be {expected}, not {type(value).__name__}")


def _string(name: str, value: Any) -> None:
    if not isinstance(value, str):
        raise _type_error(name, "a str", value)


def _flag(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise _type_error(name, "True or False", value)


def _string_mapping(name: str, value: Any) -> None:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise TypeError(f"configure({name}=...) must be a dict of str to str")


def _count(minimum: int) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _type_error(name, "an int", value)
        if value < minimum:
            raise ValueError(f"configure({name}=...) must be at least {minimum}, not {value}")

    return check


def _seconds(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _type_error(name, "a number of seconds", value)
    if not float(value) > 0:
        raise ValueError(f"configure({name}=...) must be positive, not {value}")


def _names(name: str, value: Any) -> None:
    if isinstance(value, str):
        return  # comma-separated, as TRACEFACT_MONITOR_GROUP_BY
    if not isinstance(value, (list, tuple)) or not all(isinstance(n, str) and n for n in value):
        raise _type_error(name, "a list of attribute names", value)


def _tool_names(name: str, value: Any) -> None:
    if isinstance(value, str) or not all(isinstance(n, str) and n for n in value):
        raise _type_error(name, "a list of tool names", value)


def _port(name: str, value: Any) -> None:
    _count(0)(name, value)
    if value > 65535:
        raise ValueError(f"configure({name}=...) must be a port number, not {value}")


def _callable(name: str, value: Any) -> None:
    if not callable(value):
        raise _type_error(name, "a callable taking and returning str", value)


def _exporter(name: str, value: Any) -> None:
    items = [value] if isinstance(value, (str, SpanExporter)) else value
    if not isinstance(items, (list, tuple)):
        raise _type_error(name, f"one of {EXPORTER_NAMES}, a SpanExporter or a list", value)
    for item in items:
        if isinstance(item, str):
            for part in item.split(","):
                error = exporter_name_error(part.strip())
                if error is not None:
                    raise ValueError(f"configure({name}=...): {error}")
        elif not isinstance(item, SpanExporter):
            raise _type_error(name, "a name or a SpanExporter", item)


def _evaluators(name: str, value: Any) -> None:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise _type_error(name, "a list of evaluators", value)
    for item in value:
        if isinstance(item, str):
            raise TypeError(
                f"configure({name}=...) takes evaluator objects, not the spec {item!r}: "
                "use tracefact.evaluators.registry.from_spec or TRACEFACT_EVALUATORS"
            )
        if not isinstance(getattr(item, "name", None), str) or not callable(
            getattr(item, "evaluate", None)
        ):
            raise _type_error(name, "a list of evaluators (with name and evaluate)", item)


def _sampler(name: str, value: Any) -> None:
    if not isinstance(value, Sampler):
        raise _type_error(name, "a tracefact.sampling.Sampler, e.g. Ratio(0.2)", value)


def _attach(name: str, value: Any) -> None:
    if value not in _ATTACH:
        raise ValueError(f"configure({name}=...) must be one of {_ATTACH}, not {value!r}")


def _sinks(name: str, value: Any) -> None:
    if not isinstance(value, (list, tuple)):
        raise _type_error(name, "a list of result sinks", value)
    for item in value:
        if not isinstance(item, ResultSink):
            raise _type_error(name, "a list of result sinks (submit, force_flush, shutdown)", item)


def _instance(kind: type, expected: str) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if not isinstance(value, kind):
            raise _type_error(name, expected, value)

    return check


def _scrubbing(name: str, value: Any) -> None:
    if isinstance(value, bool):
        return
    if not isinstance(value, ScrubbingOptions):
        raise _type_error(name, "False or a ScrubbingOptions", value)
    for pattern in value.extra_patterns:
        try:
            re.compile(pattern)
        except (re.error, TypeError) as exc:
            raise ValueError(f"configure({name}=...) pattern {pattern!r}: {exc}") from None
    if isinstance(value.allow_keys, str) or not all(isinstance(k, str) for k in value.allow_keys):
        raise TypeError(f"configure({name}=...) allow_keys must be a list of str")


_CHECKS: dict[str, Callable[[str, Any], None]] = {
    "service_name": _string,
    "exporter": _exporter,
    "endpoint": _string,
    "headers": _string_mapping,
    "resource_attributes": _string_mapping,
    "capture_content": _flag,
    "max_attribute_length": _count(16),
    "redact": _callable,
    "evaluators": _evaluators,
    "sampler": _sampler,
    "attach": _attach,
    "queue_size": _count(1),
    "concurrency": _count(1),
    "timeout_seconds": _seconds,
    "max_retries": _count(0),
    "max_hold_seconds": _seconds,
    "sinks": _sinks,
    "scrubbing": _scrubbing,
    "tracer_provider": _instance(TracerProvider, "an SDK TracerProvider"),
    "meter_provider": _instance(MeterProvider, "a MeterProvider"),
    "monitor_group_by": _names,
    "monitor_max_groups": _count(1),
    "monitor_window_seconds": _seconds,
    "prometheus_port": _port,
    "prometheus_host": _string,
    "exclude_tools": _tool_names,
}
