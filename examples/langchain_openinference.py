"""A LangChain app instrumented with OpenInference, evaluated by tracefact.

Its retriever span grounds the chat model's span in the same trace, with no tracefact
code beyond `configure`.

    # tracefact is not on a package index: install it from a clone (or the wheel
    # that `make dist` builds, dist/tracefact-*.whl, in place of `-e .`):
    pip install -e . langchain-openai openinference-instrumentation-langchain
    OPENAI_API_KEY=... python examples/langchain_openinference.py
"""

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_openai import ChatOpenAI
from openinference.instrumentation.langchain import LangChainInstrumentor

import tracefact

provider = tracefact.configure(service_name="langchain-example", exporter="console")
LangChainInstrumentor().instrument(tracer_provider=provider)


class Encyclopedia(BaseRetriever):
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [Document("The Eiffel Tower is 330 metres tall and was completed in 1889.")]


model = ChatOpenAI(model="gpt-4o-mini")


def answer(question: str) -> str:
    documents = Encyclopedia().invoke(question)
    context = "\n".join(d.page_content for d in documents)
    reply = model.invoke(f"Answer from these documents:\n{context}\n\nQuestion: {question}")
    return str(reply.content)


print(RunnableLambda(answer).invoke("How tall is the Eiffel Tower?"))
tracefact.shutdown()  # the evaluated span, with tracefact.eval.* attributes, is printed
