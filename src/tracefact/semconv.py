"""Every span attribute name tracefact reads or writes, in one place.

Names come from the published OpenInference and OpenTelemetry GenAI packages where
they exist, so a rename upstream is a one-line change here.
"""

from __future__ import annotations

from typing import Final, Literal

from openinference.semconv.trace import (
    DocumentAttributes,
    OpenInferenceSpanKindValues,
    SpanAttributes,
)
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE as _ERROR_TYPE
from opentelemetry.semconv.attributes.http_attributes import HTTP_ROUTE
from opentelemetry.semconv.attributes.service_attributes import SERVICE_NAME

# --- OpenInference -------------------------------------------------------------
OPENINFERENCE_SPAN_KIND = SpanAttributes.OPENINFERENCE_SPAN_KIND
INPUT_VALUE = SpanAttributes.INPUT_VALUE
INPUT_MIME_TYPE = SpanAttributes.INPUT_MIME_TYPE
OUTPUT_VALUE = SpanAttributes.OUTPUT_VALUE
OUTPUT_MIME_TYPE = SpanAttributes.OUTPUT_MIME_TYPE
LLM_MODEL_NAME = SpanAttributes.LLM_MODEL_NAME
LLM_INPUT_MESSAGES = SpanAttributes.LLM_INPUT_MESSAGES
LLM_OUTPUT_MESSAGES = SpanAttributes.LLM_OUTPUT_MESSAGES
LLM_PROMPT_TEMPLATE_VARIABLES = SpanAttributes.LLM_PROMPT_TEMPLATE_VARIABLES
LLM_TOKEN_COUNT_PROMPT = SpanAttributes.LLM_TOKEN_COUNT_PROMPT
LLM_TOKEN_COUNT_COMPLETION = SpanAttributes.LLM_TOKEN_COUNT_COMPLETION
LLM_TOKEN_COUNT_TOTAL = SpanAttributes.LLM_TOKEN_COUNT_TOTAL
RETRIEVAL_DOCUMENTS = SpanAttributes.RETRIEVAL_DOCUMENTS
DOCUMENT_CONTENT = DocumentAttributes.DOCUMENT_CONTENT
DOCUMENT_ID = DocumentAttributes.DOCUMENT_ID
DOCUMENT_SCORE = DocumentAttributes.DOCUMENT_SCORE

KIND_LLM = OpenInferenceSpanKindValues.LLM.value
KIND_RETRIEVER = OpenInferenceSpanKindValues.RETRIEVER.value
KIND_CHAIN = OpenInferenceSpanKindValues.CHAIN.value
KIND_TOOL = OpenInferenceSpanKindValues.TOOL.value
KIND_AGENT = OpenInferenceSpanKindValues.AGENT.value
KIND_EVALUATOR = OpenInferenceSpanKindValues.EVALUATOR.value

TOOL_NAME = SpanAttributes.TOOL_NAME
"""A TOOL span's tool (OpenInference)."""
TOOL_ID = SpanAttributes.TOOL_ID
"""A TOOL span's call id, where the instrumentor knows it (OpenInference)."""

MIME_JSON = "application/json"
MIME_TEXT = "text/plain"


def retrieval_document(index: int, field: str) -> str:
    """`retrieval.documents.{index}.document.{field}` for a document field name."""
    return f"{RETRIEVAL_DOCUMENTS}.{index}.{field}"


# --- OpenTelemetry GenAI -------------------------------------------------------
GEN_AI_OPERATION_NAME = gen_ai.GEN_AI_OPERATION_NAME
GEN_AI_REQUEST_MODEL = gen_ai.GEN_AI_REQUEST_MODEL
GEN_AI_USAGE_INPUT_TOKENS = gen_ai.GEN_AI_USAGE_INPUT_TOKENS
GEN_AI_USAGE_OUTPUT_TOKENS = gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS
GEN_AI_INPUT_MESSAGES = gen_ai.GEN_AI_INPUT_MESSAGES
GEN_AI_OUTPUT_MESSAGES = gen_ai.GEN_AI_OUTPUT_MESSAGES
GEN_AI_SYSTEM_INSTRUCTIONS = gen_ai.GEN_AI_SYSTEM_INSTRUCTIONS
GEN_AI_PROMPT = gen_ai.GEN_AI_PROMPT
"""Deprecated: the prompt on `gen_ai.content.prompt` events; OpenLLMetry's older
releases index it as `gen_ai.prompt.N.role` / `.content`."""
GEN_AI_COMPLETION = gen_ai.GEN_AI_COMPLETION
"""Deprecated, as GEN_AI_PROMPT, for the answer (`gen_ai.completion.N.*`)."""
GEN_AI_CONTENT_PROMPT_EVENT = "gen_ai.content.prompt"
GEN_AI_CONTENT_COMPLETION_EVENT = "gen_ai.content.completion"
GEN_AI_MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
"""GenAI's per-message events (semconv 1.27-1.36) by the role they carry: fields
`content` (text or JSON parts), `tool_calls`, and `id` (a tool message's call)."""
GEN_AI_CHOICE_EVENT = "gen_ai.choice"
"""The same for an answer: `message` (JSON: `content`, `tool_calls`) and `index`."""
GEN_AI_OPERATION_CHAT = gen_ai.GenAiOperationNameValues.CHAT.value
GEN_AI_OPERATION_RETRIEVAL = gen_ai.GenAiOperationNameValues.RETRIEVAL.value
GEN_AI_OPERATION_EXECUTE_TOOL = gen_ai.GenAiOperationNameValues.EXECUTE_TOOL.value
"""A tool's execution: its result (`gen_ai.tool.call.result`) is evidence."""
GEN_AI_OPERATION_INVOKE_AGENT = gen_ai.GenAiOperationNameValues.INVOKE_AGENT.value
"""An agent's run: it repeats its last LLM span's answer, which is the one judged."""
GEN_AI_TOOL_NAME = gen_ai.GEN_AI_TOOL_NAME
GEN_AI_TOOL_CALL_ID = gen_ai.GEN_AI_TOOL_CALL_ID
GEN_AI_TOOL_CALL_RESULT = gen_ai.GEN_AI_TOOL_CALL_RESULT
ERROR_TYPE = _ERROR_TYPE
"""Set on a span whose operation failed (a tool that raised): its result is not evidence."""
EXCEPTION_EVENT = "exception"
"""The event an exception recorded on a span leaves (a tool that raised)."""
GEN_AI_RETRIEVAL_DOCUMENTS = gen_ai.GEN_AI_RETRIEVAL_DOCUMENTS
"""JSON array on a `retrieval` span: one object per document (`id`, `score`, and `content`
when content capture is on); read for `content` (or `text`) only."""

# --- OpenLLMetry (Traceloop) --------------------------------------------------
OPENLLMETRY_REQUEST_TYPE = "llm.request.type"
"""chat | completion | embedding: how older OpenLLMetry releases mark an LLM span."""
TRACELOOP_ENTITY_INPUT = "traceloop.entity.input"
TRACELOOP_ENTITY_OUTPUT = "traceloop.entity.output"
TRACELOOP_SPAN_KIND = "traceloop.span.kind"
"""workflow | task | agent | tool: OpenLLMetry's kind of a span made by its decorators."""
TRACELOOP_KIND_TOOL = "tool"
TRACELOOP_ENTITY_NAME = "traceloop.entity.name"
OPENLLMETRY_OPERATION_RETRIEVE = "vector_db_retrieve"
"""`gen_ai.operation.name` of OpenLLMetry's LangChain retriever spans (0.62.4); their
documents are in `traceloop.entity.output` as `{"documents": [{"page_content": ...}]}`."""
DB_SYSTEM = "db.system"
"""The vector database an OpenLLMetry vector DB span queried (chroma, qdrant, pinecone...)."""
VECTOR_DB_SYSTEMS = frozenset(
    {"chroma", "pinecone", "qdrant", "weaviate", "milvus", "lancedb", "marqo"}
)
"""`db.system` values of OpenLLMetry's vector DB instrumentations: their spans are retrievers."""
DB_QUERY_RESULT_EVENT = "db.query.result"
"""OpenLLMetry: one event per document a vector DB query returned."""
DB_QUERY_RESULT_DOCUMENT = "db.query.result.document"
"""The text of the document on a `db.query.result` event (when content tracing is on)."""

# --- tracefact instrumentation -------------------------------------------------
CONTEXTS = "tracefact.contexts"
"""String array: the texts an LLM answer must be grounded in."""
INPUT_LENGTH = "tracefact.input.length"
INPUT_SHA256 = "tracefact.input.sha256"
OUTPUT_LENGTH = "tracefact.output.length"
OUTPUT_SHA256 = "tracefact.output.sha256"
CONTEXTS_SOURCE = "tracefact.contexts.source"
"""Where the evaluated contexts came from: one of CONTEXT_SOURCES."""
CONTEXT_SOURCE_EXPLICIT = "explicit"
"""`tracefact.contexts` set by the application or tracefact's decorators."""
CONTEXT_SOURCE_GROUNDING = "grounding"
"""`tracefact.grounding(documents)` around the call."""
CONTEXT_SOURCE_RETRIEVAL = "retrieval"
"""Documents of retriever spans that ended earlier in the same trace."""
CONTEXT_SOURCE_TOOL = "tool"
"""Tool results: tool messages in the LLM span's own input (earlier turns included) and
tool spans that ended earlier in the same trace."""
CONTEXT_SOURCE_TOOL_RETRIEVAL = "tool+retrieval"
"""Tool results and retrieved documents of the same trace, together."""
CONTEXT_SOURCE_TEMPLATE = "prompt_template"
"""A context-like variable (context, documents...) of `llm.prompt_template.variables`."""
CONTEXT_SOURCE_MAPPING = "mapping"
"""The user's mapping hook passed to `configure(span_mapping=...)`."""
CONTEXT_SOURCE_PROMPT = "prompt"
"""The prompt's system and other non-question messages (opt-in)."""
CONTEXT_SOURCES = (
    CONTEXT_SOURCE_EXPLICIT,
    CONTEXT_SOURCE_GROUNDING,
    CONTEXT_SOURCE_RETRIEVAL,
    CONTEXT_SOURCE_TOOL,
    CONTEXT_SOURCE_TOOL_RETRIEVAL,
    CONTEXT_SOURCE_TEMPLATE,
    CONTEXT_SOURCE_MAPPING,
    CONTEXT_SOURCE_PROMPT,
)
CONTEXTS_TOOL_CALLS = "tracefact.contexts.tool_calls"
"""String array, on a span judged against tool results: the tool calls it was judged
against, each by its call id, else the tool's name."""
TRUNCATION_MARKER = "…[truncated {} chars]"
"""Ends a text tracefact cut to its limit (recorded content, tool results), with the
number of characters cut."""
OPENINFERENCE_REDACTED = "__REDACTED__"
"""What OpenInference records in place of a text it hides (`hide_inputs`, ...)."""
CONTEXTS_COUNT = "tracefact.contexts.count"
DOCUMENTS_OMITTED = "tracefact.retrieval.documents.omitted"
"""Int, on a retriever span: how many of the documents it returned (the last ones) were
not recorded, since the span's limit on attributes (128 by default) had no room for them."""
CAPTURE_CONTENT = "tracefact.capture_content"
"""Boolean, set (to false) only on LLM spans recorded with capture_content=False: the
texts to judge were never recorded, so the reader skips them with reason `capture_off`."""
OUTPUT_NOT_TEXT = "tracefact.output.not_text"
"""On an LLM span whose output is not text (None, bytes, a coroutine): its Python type
name. No `output.value` is written, and the reader skips it with reason `not_text`."""
CONTENT_PENDING = "tracefact.content.pending"
"""Comma-separated keys, internal: the texts recorded as the call left them, to be redacted,
scrubbed, cut and repaired where the span leaves tracefact (`instrument.pending`); never on
an exported span."""
SCRUBBED = "tracefact.scrubbed"
"""String array: the attribute paths where tracefact replaced a secret (e.g.
`input.value.headers.Authorization`, `output.value`, `exception.message`)."""
EXCEPTION_TYPE = "exception.type"
EXCEPTION_MESSAGE = "exception.message"
EXCEPTION_STACKTRACE = "exception.stacktrace"
METRIC_SAMPLER_ERRORS = "tracefact.sampler.errors"
"""Counter: sampler decisions that raised; each such span counts as not sampled."""
"""With capture_content=False: how many contexts there were, their text being withheld."""

# --- tracefact evaluation results ----------------------------------------------
EVAL_STATUS = "tracefact.eval.status"
"""ok | skipped | sampled_out | dropped | timeout | error | shutdown."""
EVAL_LATENCY_MS = "tracefact.eval.latency_ms"
EVAL_SAMPLE_RATE = "tracefact.eval.sample_rate"
EVAL_COST_USD = "tracefact.eval.cost_usd"
EVAL_ERROR = "tracefact.eval.error"
"""Why the status is not ok, in a few words (timeout, error, dropped...)."""

EVAL_SKIP_REASON = "tracefact.eval.skip_reason"
"""Why a span has status `skipped`: one of SKIP_REASONS."""
EVAL_NESTED_IN = "tracefact.eval.nested_in"
"""With skip reason `nested`: the span id (16 hex digits) of the live LLM span around
this one, which is the one evaluated."""
SKIP_NO_ANSWER = "no_answer"
"""No answer text in any convention the span uses (failed call, output hidden)."""
SKIP_NO_CONTEXTS = "no_contexts"
"""An answer, but nothing to ground it in (see CONTEXT_SOURCES)."""
SKIP_NOT_TEXT = "not_text"
"""The answer is not text: an image, an unknown JSON body."""
SKIP_TOOL_CALL = "tool_call"
"""The output is only tool calls (an agent's step): the answer that follows from their
results is judged, on a later LLM span."""
SKIP_CAPTURE_OFF = "capture_off"
"""Content capture is off: the span has lengths, hashes or no message content at all."""
SKIP_NESTED = "nested"
"""An LLM span inside a live LLM span (two instrumentations of one call): the outer one
is evaluated."""
SKIP_REASONS = (
    SKIP_NO_ANSWER,
    SKIP_NO_CONTEXTS,
    SKIP_NOT_TEXT,
    SKIP_TOOL_CALL,
    SKIP_CAPTURE_OFF,
    SKIP_NESTED,
)

METRIC_SKIPPED = "tracefact.eval.skipped"
"""Counter of LLM spans with status `skipped`, by `reason` (one of SKIP_REASONS)."""
METRIC_DOCUMENTS_EVICTED = "tracefact.contexts.evicted"
"""Counter of retrieved documents the per-trace store evicted, by `reason`
(bytes, traces, documents, age)."""

EvalStatus = Literal["ok", "skipped", "sampled_out", "dropped", "timeout", "error", "shutdown"]
"""The values of `tracefact.eval.status`: why a span has, or has not, a result."""
STATUS_OK: Final = "ok"
STATUS_SKIPPED: Final = "skipped"
STATUS_SAMPLED_OUT: Final = "sampled_out"
STATUS_DROPPED: Final = "dropped"
STATUS_TIMEOUT: Final = "timeout"
STATUS_ERROR: Final = "error"
STATUS_SHUTDOWN: Final = "shutdown"

# --- refusals: one vocabulary wherever a bound or a choice turns something away ---------
Refusal = Literal["sampled_out", "full", "shutdown", "unavailable"]
"""Why a span or a request was not taken, in the span status, the export metrics and the
collector's refusals alike."""
REFUSED_SAMPLED_OUT: Final = "sampled_out"
"""The sampler passed over the span (its status: `sampled_out`)."""
REFUSED_FULL: Final = "full"
"""A bound was reached: the spans in flight for evaluation (`queue_size`; the span's
status: `dropped`), the export queue (`export_queue_size`; `tracefact.export.dropped`),
the collector's request queue or forwarding buffer (429 / RESOURCE_EXHAUSTED)."""
REFUSED_SHUTDOWN: Final = "shutdown"
"""Shutdown has begun, or its deadline passed (the span's status: `shutdown`)."""
REFUSED_UNAVAILABLE: Final = "unavailable"
"""The collector's request queue cannot take requests now (Redis unreachable): 503 +
Retry-After / UNAVAILABLE + RetryInfo, and `/readyz` answers 503 while it lasts."""
REFUSAL_STATUS: Final[dict[str, EvalStatus]] = {
    REFUSED_SAMPLED_OUT: STATUS_SAMPLED_OUT,
    REFUSED_FULL: STATUS_DROPPED,
    REFUSED_SHUTDOWN: STATUS_SHUTDOWN,
}
"""The `tracefact.eval.status` of an LLM span the evaluation pipeline refused, by reason."""


EVAL_FIELD_ESCALATION_ERROR: Final = "escalation_error"
"""`tracefact.eval.<name>.escalation_error`: why a `Cascade`'s second evaluator failed.

The result is then the first evaluator's, not escalated (its ``raw["cascade"]`` holds the
same text under this key).
"""


def eval_attribute(evaluator_name: str, field: str) -> str:
    """`tracefact.eval.{evaluator_name}.{field}`.

    Label, score, explanation, evaluator, unsupported, status.
    """
    return f"tracefact.eval.{evaluator_name}.{field}"


EVALUATION_SCOPE: Final = "tracefact.evaluation"
"""The instrumentation scope of carrier (EVALUATOR) spans, the SDK's and the collector's."""

# OpenTelemetry GenAI evaluation event.
GEN_AI_EVALUATION_EVENT = "gen_ai.evaluation.result"
GEN_AI_EVALUATION_NAME = gen_ai.GEN_AI_EVALUATION_NAME
GEN_AI_EVALUATION_SCORE_VALUE = gen_ai.GEN_AI_EVALUATION_SCORE_VALUE
GEN_AI_EVALUATION_SCORE_LABEL = gen_ai.GEN_AI_EVALUATION_SCORE_LABEL
GEN_AI_EVALUATION_EXPLANATION = gen_ai.GEN_AI_EVALUATION_EXPLANATION


def openinference_evaluation(index: int, field: str) -> str:
    """OpenInference annotation attribute `evaluations.{index}.evaluation.{field}`.

    Fields: name, score, label, explanation, annotator_kind.
    """
    return f"evaluations.{index}.evaluation.{field}"


ANNOTATOR_KIND = "annotator_kind"
ANNOTATOR_LLM = "LLM"
ANNOTATOR_CODE = "CODE"

# --- tracefact metrics ------------------------------------------------------------
METRIC_EVALUATIONS = "tracefact.evaluations"
"""Counter: evaluations by `evaluator`, `label` and `status`."""
METRIC_EVAL_SCORE = "tracefact.eval.score"
"""Histogram: hallucination scores (1 = hallucinated), by `evaluator`."""
METRIC_EVAL_DURATION = "tracefact.eval.duration"
"""Histogram: evaluation latency in ms, by `evaluator`."""
METRIC_EVAL_COST = "tracefact.eval.cost"
"""Counter: evaluation spend in USD, by `evaluator`."""
METRIC_SINK_RESULTS = "tracefact.sink.results"
"""Counter: results handed to a result sink, by `sink` and `outcome`."""
METRIC_EVAL_SPANS = "tracefact.eval.spans"
"""Counter: LLM spans by final `status`, cumulative over the process and re-configures."""
METRIC_EVAL_DROPPED = "tracefact.eval.dropped"
"""Counter: LLM spans not evaluated (status `dropped`): `queue_size` spans were in flight."""
METRIC_EVAL_QUEUE_DEPTH = "tracefact.eval.queue.depth"
"""Gauge: sampled spans in flight (admitted, not yet released), over every live pipeline."""
METRIC_EXPORT_DROPPED = "tracefact.export.dropped"
"""Counter: spans that never reached an exporter, by `reason` (EXPORT_DROP_*)."""
EXPORT_DROP_QUEUE_FULL: Final = REFUSED_FULL
"""The export queue (`export_queue_size`) was full when the span ended (the reason read
`queue_full` before the refusal vocabulary was shared)."""
EXPORT_DROP_FAILED: Final = "export_failed"
"""The exporter failed or raised on the span's batch."""
EXPORT_DROP_SHUTDOWN: Final = REFUSED_SHUTDOWN
"""Still queued or being exported when shutdown's timeout ran out, or ended after it."""

# --- the collector (`tracefact collector`) -----------------------------------------------
METRIC_COLLECTOR_RECEIVED = "tracefact.collector.spans.received"
"""Counter: spans accepted by a receiver, by `protocol` (http, grpc)."""
METRIC_COLLECTOR_FORWARDED = "tracefact.collector.spans.forwarded"
"""Counter: spans an upstream accepted, by `upstream` (its endpoint)."""
METRIC_COLLECTOR_REJECTED = "tracefact.collector.requests.rejected"
"""Counter: requests refused by a receiver, by `protocol` and `reason` (REJECT_*)."""
REJECT_UNAUTHENTICATED: Final = "unauthenticated"
REJECT_TOO_LARGE: Final = "too_large"
"""A body, or an HTTP request's head, past its limit (413, 431; RESOURCE_EXHAUSTED)."""
REJECT_CONTENT_TYPE: Final = "content_type"
REJECT_MALFORMED: Final = "malformed"
"""A body that is not OTLP, or an HTTP request line or header that is not HTTP (400)."""
REJECT_METHOD: Final = "method"
"""An HTTP method the receiver does not serve (501)."""
REJECT_PATH: Final = "path"
"""A POST to another path than `/v1/traces` (404): an exporter pointed at the wrong URL."""
REJECT_FULL: Final = REFUSED_FULL
"""The request queue or the forwarding buffer is at its bound (429 / RESOURCE_EXHAUSTED)."""
REJECT_SHUTDOWN: Final = REFUSED_SHUTDOWN
REJECT_UNAVAILABLE: Final = REFUSED_UNAVAILABLE
REJECT_INTERNAL: Final = "internal"
"""An unexpected error answering the request (a bug): 500, logged with its traceback."""
REJECT_TIMEOUT: Final = "timeout"
"""An HTTP request whose body, or a reply the client did not read, took longer than
`limits.request_timeout_seconds`: 408 (a body) or cut (a reply), and closed."""
REJECT_CONNECTIONS: Final = "connections"
"""The HTTP receiver serves `limits.max_connections` already: 503 at once, and closed."""
METRIC_COLLECTOR_UPSTREAM_RETRIES = "tracefact.collector.upstream.retries"
"""Counter: upstream requests retried after a transient failure, by `upstream`."""
METRIC_COLLECTOR_UPSTREAM_FAILED = "tracefact.collector.upstream.failed"
"""Counter: spans that never reached an upstream, by `upstream` and `reason`
(UPSTREAM_REJECTED: a permanent error such as 400; UPSTREAM_SHUTDOWN: still held when
the drain deadline passed). Each is also logged."""
UPSTREAM_REJECTED: Final = "rejected"
UPSTREAM_SHUTDOWN: Final = "shutdown"
METRIC_COLLECTOR_LIMITED = "tracefact.collector.attributes.limited"
"""Counter: attributes dropped (`limit`=LIMIT_COUNT) or string values truncated
(`limit`=LIMIT_SIZE), by `where` they were (LIMITED_*)."""
LIMIT_COUNT: Final = "count"
LIMIT_SIZE: Final = "size"
LIMITED_SPAN: Final = "span"
LIMITED_EVENT: Final = "event"
LIMITED_LINK: Final = "link"
LIMITED_RESOURCE: Final = "resource"
LIMITED_SCOPE: Final = "scope"
METRIC_COLLECTOR_RESTARTS = "tracefact.collector.threads.restarted"
"""Counter: background loops (the engine's) restarted after they raised, by `thread`.
Each restart is logged with its error; a fault that cannot clear (a queue file that is
not a queue) is not restarted: `/readyz` reports it and the process exits non-zero."""
METRIC_COLLECTOR_BUFFERED = "tracefact.collector.forward.buffered"
"""Gauge: spans held for forwarding (every upstream)."""
METRIC_COLLECTOR_QUEUE_DEPTH = "tracefact.collector.queue.depth"
"""Gauge: received requests not yet acknowledged (all their spans left upstream)."""
METRIC_COLLECTOR_WAITING = "tracefact.collector.window.waiting"
"""Gauge: LLM spans waiting in the window for later retriever spans of their trace."""
METRIC_COLLECTOR_REDELIVERED = "tracefact.collector.spans.redelivered"
"""Counter: spans of queue entries handed out again (a consumer died or lost its
acknowledgement before all of the entry's spans were acknowledged): each may reach the
upstream twice. Durable queues deliver at least once; this counts the possible duplicates."""
METRIC_COLLECTOR_REQUEUED = "tracefact.collector.requests.requeued"
"""Counter: durable-queue entries a consumer left unacknowledged at shutdown, because an
LLM span of theirs was not evaluated (or spans were not forwarded) by the drain deadline:
the queue hands them to another consumer, whose `spans.redelivered` counts them again."""
METRIC_COLLECTOR_EXPIRED = "tracefact.collector.spans.expired"
"""Counter: LLM spans a durable queue held too long or handed out too often, forwarded
unevaluated, by `reason`: QUEUE_AGE_ERROR (taken later than `queue_max_age_seconds` after
it was stored; status `timeout`) or QUEUE_DELIVERIES_ERROR (handed out more than
`queue_max_deliveries` times; status `error`)."""
QUEUE_AGE_ERROR: Final = "queue_age"
"""`tracefact.eval.error` of an LLM span that waited in the queue past its maximum age."""
QUEUE_DELIVERIES_ERROR: Final = "queue_deliveries"
"""`tracefact.eval.error` of an LLM span whose request every consumer died with."""
# --- tracefact monitoring (the sampled-rate estimator) ----------------------------
# Counters that add up across processes: per `evaluator` and group (see GROUP_ALIASES),
# with w = 1 / tracefact.eval.sample_rate and y = 1 for a hallucinated verdict.
METRIC_MONITOR_WEIGHT = "tracefact.monitor.weight"
"""Counter: Σw over judged spans, the traffic they stand for."""
METRIC_MONITOR_HALLUCINATED_WEIGHT = "tracefact.monitor.hallucinated_weight"
"""Counter: Σw·y; the rate is Σw·y / Σw."""
METRIC_MONITOR_WEIGHT_SQUARED = "tracefact.monitor.weight_squared"
"""Counter: Σw²; Kish's effective sample size is (Σw)² / Σw²."""
METRIC_MONITOR_HALLUCINATED_WEIGHT_SQUARED = "tracefact.monitor.hallucinated_weight_squared"
"""Counter: Σw²·y; with Σw² it gives the estimate's variance, hence its interval."""
METRIC_MONITOR_SPANS = "tracefact.monitor.spans"
"""Counter: sampled spans by `status`: `ok` (judged) or why not (dropped, timeout...)."""
METRIC_MONITOR_RATE = "tracefact.monitor.rate"
"""Gauge (one process): the windowed hallucination rate."""
METRIC_MONITOR_RATE_LOWER = "tracefact.monitor.rate.lower"
"""Gauge (one process): the 95% interval's lower bound."""
METRIC_MONITOR_RATE_UPPER = "tracefact.monitor.rate.upper"
"""Gauge (one process): the 95% interval's upper bound."""
METRIC_MONITOR_N_EFF = "tracefact.monitor.n_eff"
"""Gauge (one process): Kish's effective sample size in the window."""
METRIC_MONITOR_COVERAGE = "tracefact.monitor.coverage"
"""Gauge (one process): judged / sampled spans in the window."""
MONITOR_EVALUATOR: Final = "evaluator"
"""The metric attribute naming the evaluator."""
MONITOR_STATUS: Final = "status"
"""The metric attribute of `tracefact.monitor.spans`."""
METRIC_REASON: Final = "reason"
"""The metric attribute saying why, on the drop, skip, rejection and upstream-failure
counters (`tracefact.export.dropped`, `tracefact.collector.requests.rejected`...)."""
UNJUDGED_STATUSES = (STATUS_DROPPED, STATUS_TIMEOUT, STATUS_ERROR, STATUS_SHUTDOWN)
"""Sampled but not judged: left out of the rate, counted against its coverage."""
EVALUATOR_UNKNOWN: Final = "(unknown)"
"""The evaluator of a span that failed as a whole before any evaluator was known."""
GROUP_OTHER: Final = "(other)"
"""The group value of every group past the monitor's `max_groups`."""
GROUP_MISSING: Final = "(none)"
"""The group value of a span without the grouping attribute."""
GROUP_ALIASES: Final = {
    "model": (LLM_MODEL_NAME, GEN_AI_REQUEST_MODEL, gen_ai.GEN_AI_RESPONSE_MODEL),
    "service": (SERVICE_NAME,),
    "route": (HTTP_ROUTE,),
    "prompt_version": (SpanAttributes.LLM_PROMPT_TEMPLATE_VERSION,),
}
"""Group-by names and the span (then resource) attributes they read, first found wins;
any other group-by name is read as an attribute of that name."""

# --- human review (the corrected rate: tracefact.review) ---------------------------------
# Decided once, on the evaluation worker after the verdict, for every evaluated span.
REVIEW_PROBABILITY = "tracefact.review.probability"
"""The probability π the span had of being selected for human review, given its stratum."""
REVIEW_STRATUM = "tracefact.review.stratum"
"""The span's review stratum: `<group values joined by |>/<verdict>`, or just the verdict
(REVIEW_VERDICTS) where review has no group_by."""
REVIEW_SELECTED = "tracefact.review.selected"
"""Bool: selected for review (filter on it in a backend to find the spans to label)."""
REVIEW_SECOND_REVIEWER = "tracefact.review.second_reviewer"
"""Bool, on selected spans where review_double_share is set: a second reviewer labels it
too (their disagreements measure the reviewers' own error)."""
REVIEW_EVALUATOR = "tracefact.review.evaluator"
"""The evaluator whose verdict decided the stratum (the first one configured)."""
REVIEW_VERDICT_HALLUCINATED: Final = "hallucinated"
REVIEW_VERDICT_FACTUAL: Final = "factual"
REVIEW_VERDICT_NONE: Final = "none"
"""The stratum verdict of an evaluated span without a verdict (error, timeout...)."""
REVIEW_VERDICTS = (REVIEW_VERDICT_HALLUCINATED, REVIEW_VERDICT_FACTUAL, REVIEW_VERDICT_NONE)
REVIEW_LABEL_UNSURE: Final = "unsure"
"""A human label that counts as pending (a span's other reviewers' labels still count)."""
REVIEW_LABELS = (REVIEW_VERDICT_HALLUCINATED, REVIEW_VERDICT_FACTUAL, REVIEW_LABEL_UNSURE)
"""The values a human label takes."""
REVIEW_ANNOTATION_NAME: Final = "tracefact.review"
"""The default Phoenix annotation name people label selected spans under (HUMAN)."""
# Gauges (the one process that holds selections and labels), per `evaluator`:
METRIC_REVIEW_RATE = "tracefact.review.rate"
"""Gauge: the corrected hallucination rate over the review window (absent when withheld)."""
METRIC_REVIEW_RATE_LOWER = "tracefact.review.rate.lower"
METRIC_REVIEW_RATE_UPPER = "tracefact.review.rate.upper"
METRIC_REVIEW_LABELS = "tracefact.review.labels"
"""Gauge: labelled spans in the window (decided labels of selected spans)."""
METRIC_REVIEW_PENDING = "tracefact.review.pending"
"""Gauge: selected spans in the window without a decided label (none yet, or unsure)."""
METRIC_REVIEW_WINDOW_END = "tracefact.review.window_end"
"""Gauge: unix seconds, the end of the window the corrected rate covers."""
REVIEW_GROUP: Final = "group"
"""The metric attribute of the review gauges holding a stratum group's values (absent for
all groups together)."""
METRIC_REVIEW_SHOWN = "tracefact.review.shown"
"""Gauge: 1 when the corrected rate is shown, 0 when withheld (too few labels)."""
