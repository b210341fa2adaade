"""A pydantic-ai agent that calls a tool; tracefact judges its answer on what the tool returned.

# tracefact is not on a package index: install it from a clone (or the wheel
# that `make dist` builds, dist/tracefact-*.whl, in place of `-e .`):
pip install -e . 'pydantic-ai-slim[openai]'
OPENAI_API_KEY=... python examples/agent_pydantic_ai.py   # OPENAI_BASE_URL for others

Nothing says what the answer must rest on: the tool's result is the evidence. The first
model call only asks for the tool (skipped, reason `tool_call`); the second answers, and
is judged on the tool's text (`tracefact.contexts.source = tool`).
"""

from pydantic_ai import Agent

import tracefact

tracefact.configure(service_name="agent-example", exporter="console")  # the line tracefact adds
Agent.instrument_all()  # pydantic-ai's own OpenTelemetry spans, as any pydantic-ai app has

# "openai-chat:": the Chat Completions API, which any OpenAI-compatible server speaks.
agent = Agent("openai-chat:gpt-4o-mini", instructions="Answer from what the tool returns.")


@agent.tool_plain
def landmark_facts(name: str) -> str:
    """Facts about a landmark."""
    return (
        "The Eiffel Tower is 330 metres tall and stands on the Champ de Mars in Paris. "
        "It was completed in 1889 for the World's Fair."
    )


print(agent.run_sync("How tall is the Eiffel Tower and when was it completed?").output)
tracefact.shutdown()  # the evaluated LLM span, with tracefact.eval.* attributes, is printed
