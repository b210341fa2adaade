"""Third-party instrumentors of the openai SDK and LangChain, driven against the fake server.

Shared by scripts/record_instrumentor_fixtures.py (which records their spans as OTLP/JSON
fixtures) and tests/instrumentors/ (which evaluates them live). The instrumentor packages
are imported only inside `active`, so this module imports without them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.openai_server import API_KEY, FakeOpenAI, fake_openai

DOCUMENT = (
    "The Eiffel Tower is 330 metres tall and stands on the Champ de Mars in Paris. "
    "It was completed in 1889 for the World's Fair."
)
QUESTION = "How tall is the Eiffel Tower and when was it completed?"
SYSTEM = "Answer only from this document:\n" + DOCUMENT


@dataclass(frozen=True)
class Scenario:
    name: str
    answer: str
    hallucinated: bool


SCENARIOS = (
    Scenario("grounded", "The Eiffel Tower is 330 metres tall and was completed in 1889.", False),
    Scenario(
        "invented",
        "The Eiffel Tower is 512 metres tall, was completed in 1925 and is painted gold.",
        True,
    ),
    Scenario("retriever", "The Eiffel Tower is 330 metres tall and was completed in 1889.", False),
)


def messages() -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]


@dataclass(frozen=True)
class Instrumentor:
    instrument: Callable[[Any], Callable[[], None]]
    """Instruments with the given tracer provider; returns the uninstrument call."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment the instrumentor reads at import or instrument time."""
    scenarios: tuple[str, ...] = ("grounded", "invented")
    pinned: str | None = None
    """"package==version" this instrumentor stands for, when it is not the `instrumentors`
    extra's: it is recorded only when named, in a venv that has exactly that release."""

    @contextmanager
    def active(self, provider: Any) -> Iterator[FakeOpenAI]:
        with fake_openai() as server:
            undo = self.instrument(provider)
            try:
                yield server
            finally:
                undo()


def _openinference(provider: Any) -> Callable[[], None]:
    from openinference.instrumentation.openai import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    return instrumentor.uninstrument  # type: ignore[no-any-return]


def _openai_v2(provider: Any) -> Callable[[], None]:
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    return instrumentor.uninstrument  # type: ignore[no-any-return]


def _openllmetry(provider: Any) -> Callable[[], None]:
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    return instrumentor.uninstrument  # type: ignore[no-any-return]


def _openllmetry_chromadb(provider: Any) -> Callable[[], None]:
    from opentelemetry.instrumentation.chromadb import ChromaInstrumentor
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor

    chroma, llm = ChromaInstrumentor(), OpenAIInstrumentor()
    chroma.instrument(tracer_provider=provider)
    llm.instrument(tracer_provider=provider)

    def undo() -> None:
        llm.uninstrument()
        chroma.uninstrument()

    return undo


def _openllmetry_langchain(provider: Any) -> Callable[[], None]:
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    instrumentor = LangchainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    return instrumentor.uninstrument  # type: ignore[no-any-return]


def _langchain(provider: Any) -> Callable[[], None]:
    from openinference.instrumentation.langchain import LangChainInstrumentor

    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    return instrumentor.uninstrument  # type: ignore[no-any-return]


OPENAI_V2_ENV = {
    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
}

INSTRUMENTORS: dict[str, Instrumentor] = {
    "openinference": Instrumentor(_openinference),
    "openai_v2": Instrumentor(_openai_v2, OPENAI_V2_ENV),
    "openllmetry": Instrumentor(_openllmetry, {"TRACELOOP_METRICS_ENABLED": "false"}),
    "langchain": Instrumentor(_langchain, scenarios=("grounded", "invented", "retriever")),
    # The last OpenLLMetry openai release that writes the indexed gen_ai.prompt.N.* /
    # gen_ai.completion.N.* attributes (0.55.0 writes gen_ai.input/output.messages).
    "openllmetry_legacy": Instrumentor(
        _openllmetry,
        {"TRACELOOP_METRICS_ENABLED": "false"},
        pinned="opentelemetry-instrumentation-openai==0.54.0",
    ),
    # OpenLLMetry's vector DB spans: an in-memory Chroma query, then the OpenLLMetry openai
    # call, in one trace. Recorded from a scratch venv (chromadb is too heavy for the extra).
    "openllmetry_chromadb": Instrumentor(
        _openllmetry_chromadb,
        {"TRACELOOP_METRICS_ENABLED": "false", "ANONYMIZED_TELEMETRY": "False"},
        scenarios=("retriever",),
        pinned="opentelemetry-instrumentation-chromadb==0.62.4",
    ),
    # OpenLLMetry's LangChain retriever span (the fake retriever) and its LLM span.
    # Recorded from a scratch venv: it instruments LangChain as OpenInference's does.
    "openllmetry_langchain": Instrumentor(
        _openllmetry_langchain,
        {"TRACELOOP_METRICS_ENABLED": "false"},
        scenarios=("retriever",),
        pinned="opentelemetry-instrumentation-langchain==0.62.4",
    ),
}


def run_scenario(
    name: str, scenario: Scenario, stream: bool, server: FakeOpenAI, provider: Any = None
) -> str:
    """Make the scenario's call through the instrumented library; returns the answer.

    `provider` (the instrumented one) is needed by scenarios that open their own root span.
    """
    server.reply(scenario.answer)
    if name in ("langchain", "openllmetry_langchain"):
        return _langchain_call(scenario, stream, server)
    if name == "openllmetry_chromadb":
        return _chroma_call(stream, server, provider)
    return _openai_call(messages(), stream, server)


def _openai_call(prompt: list[dict[str, str]], stream: bool, server: FakeOpenAI) -> str:
    import openai

    client = openai.OpenAI(base_url=server.api_base, api_key=API_KEY, max_retries=0)
    if not stream:
        response = client.chat.completions.create(model="gpt-4o-mini", messages=prompt)  # type: ignore[arg-type]
        return response.choices[0].message.content or ""
    chunks = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=prompt,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
    )
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def _chroma_call(stream: bool, server: FakeOpenAI, provider: Any) -> str:
    """Retrieve from an in-memory Chroma (given embeddings: no model), then answer."""
    import chromadb

    client = chromadb.EphemeralClient()
    collection = client.get_or_create_collection("eiffel", embedding_function=None)
    collection.upsert(ids=["eiffel"], documents=[DOCUMENT], embeddings=[[1.0, 0.0]])
    with provider.get_tracer("rag-app").start_as_current_span("rag"):
        found = collection.query(query_embeddings=[[1.0, 0.0]], n_results=1)
        documents = found["documents"][0]
        prompt = [
            {"role": "system", "content": "Answer from the documents."},
            {"role": "user", "content": f"Documents: {documents[0]}\nQuestion: {QUESTION}"},
        ]
        return _openai_call(prompt, stream, server)


def _langchain_call(scenario: Scenario, stream: bool, server: FakeOpenAI) -> str:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableLambda
    from langchain_openai import ChatOpenAI

    class FakeRetriever(BaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return [Document(page_content=DOCUMENT, metadata={"id": "eiffel"})]

    model = ChatOpenAI(
        model="gpt-4o-mini", base_url=server.api_base, api_key=API_KEY, max_retries=0
    )  # type: ignore[call-arg]

    def answer(question: str) -> str:
        if scenario.name == "retriever":
            documents = FakeRetriever().invoke(question)
            prompt = [
                SystemMessage("Answer from the documents."),
                HumanMessage(f"Documents: {documents[0].page_content}\nQuestion: {question}"),
            ]
        else:
            prompt = [SystemMessage(SYSTEM), HumanMessage(question)]
        if stream:
            return "".join(str(chunk.content) for chunk in model.stream(prompt))
        return str(model.invoke(prompt).content)

    if scenario.name == "retriever":  # one trace: a chain around the retriever and the model
        return str(RunnableLambda(answer).invoke(QUESTION))
    return answer(QUESTION)
