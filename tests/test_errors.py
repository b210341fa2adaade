"""One tree of errors with one root: callers catch exactly what they mean."""

from __future__ import annotations

import pytest

from tracefact._imports import import_extra
from tracefact._retry import is_transient
from tracefact.collector.config import ConfigError
from tracefact.collector.queue import QueueFull, QueueUnavailable
from tracefact.errors import ConfigurationError, MissingExtraError, TracefactError
from tracefact.evaluators.base import EvaluationError, ProviderError, RateLimitError


def test_a_missing_extra_is_tracefacts_and_an_import_error_not_an_evaluation_error() -> None:
    with pytest.raises(MissingExtraError) as caught:
        import_extra("no_such_module_anywhere", "collector")
    error = caught.value
    assert isinstance(error, TracefactError) and isinstance(error, ImportError)
    assert not isinstance(error, EvaluationError)
    assert "tracefact[collector]" in str(error)
    assert not is_transient(error)


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (ProviderError("503", status_code=503, transient=True), True),
        (RateLimitError("slow down"), True),
        (ProviderError("400", status_code=400), False),
        (QueueFull(1.0), True),
        (QueueUnavailable("redis down", 1.0), True),
        (ConfigError("queue: bad"), False),
    ],
)
def test_every_error_hangs_under_the_root_with_its_transient_flag(
    error: TracefactError, transient: bool
) -> None:
    assert isinstance(error, TracefactError)
    assert is_transient(error) is transient


def test_configuration_errors_are_value_errors_too() -> None:
    assert issubclass(ConfigError, ConfigurationError)
    assert issubclass(ConfigurationError, ValueError)
