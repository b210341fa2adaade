"""Agent frameworks that call a tool, then answer, against the fake OpenAI server.

Shared by scripts/record_instrumentor_fixtures.py (`--agents`: their spans as OTLP/JSON
fixtures), tests/agents/ (evaluated live, through the SDK and through the collector) and
tests/agents/app.py (an agent app that knows nothing of tracefact). Each framework runs
the same agent: one tool, `landmark_facts`, which returns `DOCUMENT`; the fake model first
asks for it, then gives the next of its final answers (grounded or invented). The
framework packages (the `agents` extra) are imported only inside the functions here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import cycle
from threading import Lock
from typing import Any

from tests.fakes.instrumentors import DOCUMENT, QUESTION, SCENARIOS
from tests.fakes.openai_server import API_KEY, Canned, FakeOpenAI, ToolCall

TOOL = "landmark_facts"
CALL_ID = "call_eiffel"
INSTRUCTIONS = "Answer from what the tool returns."
ANSWERS = {s.name: s.answer for s in SCENARIOS if s.name in ("grounded", "invented")}
MODEL = "gpt-4o-mini"


def landmark_facts(name: str) -> str:
    """Facts about a landmark."""
    return DOCUMENT


class AgentModel:
    """The fake model's side of an agent: a tool call first, then a final answer.

    A request that already holds a tool result gets the next of `answers` (in turn,
    whichever thread asks); any other gets the call to `landmark_facts`.
    """

    def __init__(self, answers: Sequence[str]) -> None:
        self._answers = cycle(answers)
        self._lock = Lock()  # the server answers on a thread per request

    def __call__(self, body: dict[str, Any]) -> Canned:
        if any(m.get("role") == "tool" for m in body.get("messages", ())):
            with self._lock:
                return Canned(content=next(self._answers))
        arguments = json.dumps({"name": "Eiffel Tower"})
        return Canned(tool_calls=(ToolCall(TOOL, arguments, CALL_ID),))


@dataclass(frozen=True)
class Framework:
    instrument: Callable[[Any], Callable[[], None]]
    """Instruments with the given tracer provider (None: the global one); returns the undo."""
    run: Callable[[str, bool], str]
    """Runs the agent against an OpenAI base URL, streaming or not; returns its answer."""


# --- pydantic-ai: its own OpenTelemetry GenAI spans ----------------------------------------
def _pydantic_ai_instrument(provider: Any) -> Callable[[], None]:
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings

    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
    return lambda: Agent.instrument_all(False)


def _pydantic_ai_run(base_url: str, stream: bool) -> str:
    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    async def run() -> str:
        async with AsyncOpenAI(base_url=base_url, api_key=API_KEY, max_retries=0) as client:
            model = OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client))
            agent = Agent(model, instructions=INSTRUCTIONS, tools=[landmark_facts])
            if not stream:
                return (await agent.run(QUESTION)).output
            async with agent.run_stream(QUESTION) as result:
                return await result.get_output()

    return asyncio.run(run())


# --- the OpenAI Agents SDK, under OpenInference ---------------------------------------------
def _openai_agents_instrument(provider: Any) -> Callable[[], None]:
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=provider)  # its processor replaces OpenAI's export
    return instrumentor.uninstrument  # type: ignore[no-any-return]


def _openai_agents_run(base_url: str, stream: bool) -> str:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
    from openai import AsyncOpenAI

    async def run() -> str:
        async with AsyncOpenAI(base_url=base_url, api_key=API_KEY, max_retries=0) as client:
            agent = Agent(
                name="guide",
                instructions=INSTRUCTIONS,
                tools=[function_tool(landmark_facts)],
                model=OpenAIChatCompletionsModel(MODEL, openai_client=client),
            )
            if not stream:
                return str((await Runner.run(agent, QUESTION)).final_output)
            result = Runner.run_streamed(agent, QUESTION)
            async for _ in result.stream_events():
                pass
            return str(result.final_output)

    return asyncio.run(run())


# --- LangGraph: a ReAct graph (model, tools, back to the model), under OpenInference ---------
def _langgraph_instrument(provider: Any) -> Callable[[], None]:
    from openinference.instrumentation.langchain import LangChainInstrumentor

    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    return instrumentor.uninstrument  # type: ignore[no-any-return]


def _langgraph_run(base_url: str, stream: bool) -> str:
    from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    tools = [tool(landmark_facts)]
    chat = ChatOpenAI(
        model=MODEL, base_url=base_url, api_key=API_KEY, max_retries=0, streaming=stream
    )  # type: ignore[call-arg]
    model = chat.bind_tools(tools)

    def call_model(state: MessagesState) -> dict[str, list[AnyMessage]]:
        return {"messages": [model.invoke([SystemMessage(INSTRUCTIONS), *state["messages"]])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    agent = graph.compile()
    start: dict[str, Any] = {"messages": [HumanMessage(QUESTION)]}
    if stream:  # the model streams its replies; the graph streams its states
        states = list(agent.stream(start, stream_mode="values"))
        return str(states[-1]["messages"][-1].content)
    return str(agent.invoke(start)["messages"][-1].content)


FRAMEWORKS: dict[str, Framework] = {
    "pydantic_ai": Framework(_pydantic_ai_instrument, _pydantic_ai_run),
    "openai_agents": Framework(_openai_agents_instrument, _openai_agents_run),
    "langgraph": Framework(_langgraph_instrument, _langgraph_run),
}


def run_agent(name: str, answer: str, stream: bool, server: FakeOpenAI) -> str:
    """One agent run whose final answer is `answer`; returns what the agent answered."""
    server.responder = AgentModel([answer])
    return FRAMEWORKS[name].run(server.api_base, stream)
