"""LexicalOverlap: the deterministic offline baseline."""

from __future__ import annotations

import pytest

from tracefact.evaluators import EvalCase, Evaluator, InvalidCaseError, LexicalOverlap

CONTEXT = "The Eiffel Tower was completed in 1889 and is 330 metres tall."


async def test_supported_answer_is_factual() -> None:
    result = await LexicalOverlap().evaluate(
        EvalCase(
            input="When was it completed?", contexts=[CONTEXT], output="It was completed in 1889."
        )
    )
    assert result.label == "factual"
    assert result.score == 0.0
    assert result.unsupported == []
    assert result.annotator_kind == "CODE"


async def test_invented_sentence_is_named_in_the_explanation() -> None:
    output = "The tower is 330 metres tall. It was designed by Leonardo da Vinci in Rome."
    result = await LexicalOverlap().evaluate(EvalCase(input="", contexts=[CONTEXT], output=output))
    assert result.label == "hallucinated"
    assert result.unsupported == ["It was designed by Leonardo da Vinci in Rome."]
    assert "Leonardo" in result.explanation
    assert 0.0 < result.score < 1.0
    assert result.raw["content_words"] > result.raw["missing_words"] > 0


async def test_question_words_count_as_supported() -> None:
    case = EvalCase(input="Is the Eiffel Tower in Paris?", contexts=[CONTEXT], output="Paris")
    assert (await LexicalOverlap().evaluate(case)).label == "factual"


async def test_no_contexts_is_an_invalid_case() -> None:
    with pytest.raises(InvalidCaseError):
        await LexicalOverlap().evaluate(EvalCase(output="anything"))


def test_follows_the_evaluator_protocol() -> None:
    evaluator = LexicalOverlap(threshold=0.3, name="overlap")
    assert isinstance(evaluator, Evaluator)
    description = evaluator.describe()
    assert description.name == "overlap"
    assert description.settings["threshold"] == 0.3
    assert description.direction == "minimize"
    with pytest.raises(ValueError, match="threshold"):
        LexicalOverlap(threshold=0)
