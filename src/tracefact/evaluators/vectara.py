"""`VectaraHHEM`: Vectara's factual-consistency API (the hosted HHEM model) as an evaluator.

Vectara scores consistency (1 = consistent); tracefact's score is the opposite,
``1 - score``, and Vectara's own figures stay in ``raw``. One call makes one request:
rate limits (with their ``Retry-After``), server errors and lost connections are raised
as transient errors, and the caller's retry policy (the pipeline's) decides when to
try again, so retries never multiply across layers.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from types import TracebackType
from typing import Any

import httpx

from tracefact._retry import is_transient_status, retry_after_seconds
from tracefact.evaluators.base import (
    FACTUAL,
    HALLUCINATED,
    BadReplyError,
    EvalCase,
    EvalResult,
    EvaluationTimeout,
    EvaluatorDescription,
    InvalidCaseError,
    ProviderError,
    RateLimitError,
)

ENDPOINT = "/v2/evaluate_factual_consistency"
_LANGUAGE = re.compile(r"[a-z]{3}")


class VectaraHHEM:
    """Hallucination score = 1 - Vectara's consistency score; needs a Vectara API key.

    The key comes from ``api_key`` or the ``VECTARA_API_KEY`` environment variable.
    ``language`` is an ISO 639-3 code (``eng``, ``fra``, ...).
    """

    def __init__(
        self,
        api_key: str | None = None,
        language: str = "eng",
        model: str = "hhem_v2.2",
        base_url: str = "https://api.vectara.io",
        timeout: float = 30.0,
        threshold: float = 0.5,
        name: str = "hallucination",
    ) -> None:
        key = api_key or os.environ.get("VECTARA_API_KEY")
        if not key:
            raise ValueError("VectaraHHEM needs an API key: pass api_key= or set VECTARA_API_KEY")
        if not _LANGUAGE.fullmatch(language):
            raise ValueError(f"language must be an ISO 639-3 code like 'eng', got {language!r}")
        if not 0.0 <= threshold < 1.0:
            raise ValueError(f"threshold must be within [0, 1), got {threshold}")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        self.name = name
        self.language = language
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.threshold = threshold
        self._key = key
        # An httpx client belongs to the event loop it first ran on; keep one per loop.
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def describe(self) -> EvaluatorDescription:
        return EvaluatorDescription(
            name=self.name,
            evaluator="vectara-hhem",
            source="api",
            model=self.model,
            settings={
                "language": self.language,
                "threshold": self.threshold,
                "base_url": self.base_url,
            },
        )

    async def evaluate(self, case: EvalCase) -> EvalResult:
        started = time.perf_counter()
        if not case.contexts:
            raise InvalidCaseError("VectaraHHEM needs at least one context")
        body = {
            "generated_text": case.output,
            "source_texts": case.contexts,
            "language": self.language,
            "model_parameters": {"model_name": self.model},
        }
        reply = await self._post(body)
        try:
            consistency = float(reply["score"])
        except (KeyError, TypeError, ValueError) as exc:
            raise BadReplyError(f"Vectara reply has no numeric score: {reply!r}") from exc
        if not 0.0 <= consistency <= 1.0:
            raise BadReplyError(f"Vectara score {consistency} is outside [0, 1]")
        score = 1.0 - consistency
        p_inconsistent = reply.get("p_inconsistent")
        explanation = f"Vectara {self.model} consistency score {consistency:.3f}"
        if isinstance(p_inconsistent, (int, float)):
            explanation += f" (p_inconsistent {p_inconsistent:.3f})"
        return EvalResult(
            name=self.name,
            label=HALLUCINATED if score > self.threshold else FACTUAL,
            score=score,
            explanation=explanation,
            evaluator=f"vectara-hhem({self.model})",
            latency_ms=(time.perf_counter() - started) * 1000,
            cost_usd=None,  # billed by Vectara plan, not per call at a known price
            annotator_kind="CODE",
            raw={
                "score": consistency,
                "p_consistent": reply.get("p_consistent"),
                "p_inconsistent": p_inconsistent,
                "model": self.model,
                "language": self.language,
            },
        )

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        """One POST; failures become typed errors, transient ones for the caller to retry."""
        client = self._client_for_loop()
        try:
            response = await client.post(ENDPOINT, json=body)
        except httpx.TimeoutException as exc:
            raise EvaluationTimeout(f"Vectara did not answer within {self.timeout}s") from exc
        except httpx.TransportError as exc:
            raise ProviderError(
                f"cannot reach Vectara at {self.base_url}: {exc!r}", transient=True
            ) from exc
        if response.status_code != 200:
            raise _status_error(response, self.language)
        return _json_object(response)

    def _client_for_loop(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = httpx.AsyncClient(
                base_url=self.base_url,
                timeout=self.timeout,
                headers={"x-api-key": self._key, "Accept": "application/json"},
            )
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client of the running loop, if any."""
        if self._client is not None and self._client_loop is asyncio.get_running_loop():
            await self._client.aclose()
        self._client = self._client_loop = None

    async def __aenter__(self) -> VectaraHHEM:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


def _json_object(response: httpx.Response) -> dict[str, Any]:
    try:
        reply = response.json()
    except ValueError as exc:
        raise BadReplyError(f"Vectara reply is not JSON: {response.text[:200]!r}") from exc
    if not isinstance(reply, dict):
        raise BadReplyError(f"Vectara reply is not a JSON object: {reply!r}")
    return reply


def _status_error(response: httpx.Response, language: str) -> ProviderError:
    """A typed error whose message names the likely cause of each documented status."""
    status = response.status_code
    detail = response.text[:300]
    if status == 429:
        return RateLimitError(
            f"Vectara rate limit (429): {detail}",
            retry_after=retry_after_seconds(response.headers),
        )
    if is_transient_status(status):
        return ProviderError(f"Vectara server error ({status}): {detail}", status, transient=True)
    cause = {
        400: "Vectara rejected the request as malformed (400)",
        401: "Vectara did not accept the API key (401); check VECTARA_API_KEY",
        403: "Vectara refused the request (403): the API key is wrong or lacks permission; "
        "check VECTARA_API_KEY",
        422: f"Vectara does not support language {language!r} (422)",
    }.get(status, f"Vectara answered HTTP {status}")
    return ProviderError(f"{cause}: {detail}", status, transient=False)
