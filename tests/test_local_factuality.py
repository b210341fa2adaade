"""LocalFactuality: the embedded ONNX hallucination detector, through its public API."""

from __future__ import annotations

import asyncio

import pytest

from tracefact.evaluators.base import EvalCase, Evaluator, InvalidCaseError
from tracefact.evaluators.local import LocalFactuality
from tracefact.evaluators.local.alignment import FEATURES
from tracefact.models import local_factuality_dir

CONTEXT = (
    "Marie Curie was born in Warsaw in 1867. She moved to Paris in 1891 to study physics "
    "at the Sorbonne. In 1903 she shared the Nobel Prize in Physics with Pierre Curie and "
    "Henri Becquerel. In 1911 she won a second Nobel Prize, in Chemistry, for the discovery "
    "of polonium and radium."
)
OTHER_CONTEXT = (
    "The Golden Gate Bridge opened in 1937 and spans the strait between San Francisco Bay "
    "and the Pacific Ocean. Its chief engineer was Joseph Strauss, and the bridge is painted "
    "a colour known as international orange."
)
QUESTION = "Where was Marie Curie born?"
FAITHFUL = "Marie Curie was born in Warsaw in 1867."
EDITED = "Marie Curie was born in Paris in 1867."


def case(output: str, contexts: list[str] | None = None, question: str = QUESTION) -> EvalCase:
    return EvalCase(
        input=question, contexts=[CONTEXT] if contexts is None else contexts, output=output
    )


@pytest.fixture(scope="module")
def detector() -> LocalFactuality:
    evaluator = LocalFactuality()
    evaluator.load()
    return evaluator


def test_ships_small_model_and_loads_fast(detector: LocalFactuality) -> None:
    directory = local_factuality_dir()
    sizes = sum(path.stat().st_size for path in directory.iterdir() if path.is_file())
    assert {"model.onnx", "tokenizer.json", "config.json"} <= {p.name for p in directory.iterdir()}
    assert sizes < 40 * 1024 * 1024
    assert isinstance(detector, Evaluator)
    described = detector.describe()
    assert described.name == "hallucination"
    assert described.direction == "minimize"
    assert 0.0 < described.settings["threshold"] < 1.0


async def test_context_swap_flips_the_label(detector: LocalFactuality) -> None:
    own = await detector.evaluate(case("Warsaw"))
    swapped = await detector.evaluate(case("Warsaw", contexts=[OTHER_CONTEXT]))
    assert own.label == "factual"
    assert swapped.label == "hallucinated"
    assert own.annotator_kind == "CODE"
    assert own.evaluator.startswith("local-factuality")
    assert set(own.raw["features"]) == set(FEATURES)


async def test_contexts_about_another_subject_are_named_in_the_explanation(
    detector: LocalFactuality,
) -> None:
    question = "What did Marie Curie study in Paris?"
    own = await detector.evaluate(case("She studied physics.", question=question))
    elsewhere = await detector.evaluate(
        case("She studied physics.", contexts=[OTHER_CONTEXT], question=question)
    )
    assert own.label == "factual"
    assert own.raw["topic_overlap"] > 0.5
    assert "about something else" not in own.explanation
    assert elsewhere.label == "hallucinated"
    assert elsewhere.raw["topic_overlap"] == 0.0
    assert "The contexts are about something else" in elsewhere.explanation


@pytest.mark.parametrize(
    ("question", "answer", "context"),
    [
        ("Is it safe for kids?", "Yes, from age 6.", "Suitable for children aged six and over."),
        ("What's the price?", "$20.", "Cost: 20 USD per month."),
    ],
)
async def test_a_short_answer_in_other_words_is_not_off_topic(
    detector: LocalFactuality, question: str, answer: str, context: str
) -> None:
    result = await detector.evaluate(case(answer, contexts=[context], question=question))
    assert result.raw["topic_overlap"] >= 0.5
    assert "about something else" not in result.explanation
    assert result.label == "factual"


async def test_a_bare_yes_rests_on_the_contexts_a_sign_off_claims_nothing(
    detector: LocalFactuality,
) -> None:
    question = "Was Marie Curie born in Warsaw?"
    own = await detector.evaluate(case("Yes.", question=question))
    elsewhere = await detector.evaluate(case("Yes.", contexts=[OTHER_CONTEXT], question=question))
    thanks = await detector.evaluate(
        case("Happy to help!", contexts=[OTHER_CONTEXT], question="Thanks a lot!")
    )
    assert (own.label, own.explanation) == ("factual", "The answer makes no claim to check.")
    assert elsewhere.label == "hallucinated"
    assert elsewhere.unsupported == ["Yes."]
    assert "about something else" in elsewhere.explanation
    assert (thanks.label, thanks.score) == ("factual", 0.0)


@pytest.mark.parametrize(
    "abstention",
    [
        "I couldn't find anything about gift card refunds in the documents I have.",
        "The provided documents don't cover gift card refunds, so I can't answer that.",
        "Sorry, I don't know.",
    ],
)
async def test_saying_the_contexts_lack_the_answer_claims_nothing(
    detector: LocalFactuality, abstention: str
) -> None:
    question = "Can I get a refund on a gift card?"
    result = await detector.evaluate(case(abstention, contexts=[OTHER_CONTEXT], question=question))
    guessed = await detector.evaluate(
        case(
            f"{abstention[:-1]}, but they can be refunded within 30 days.",
            [OTHER_CONTEXT],
            question,
        )
    )
    assert (result.label, result.explanation) == ("factual", "The answer makes no claim to check.")
    assert guessed.label == "hallucinated"


@pytest.mark.parametrize(
    ("question", "faithful", "edited"),
    [
        (QUESTION, "Warsaw", "Paris"),
        (
            "What did she win in 1911?",
            "A Nobel Prize in Chemistry.",
            "A Nobel Prize in Literature.",
        ),
        (QUESTION, FAITHFUL, EDITED),
    ],
)
async def test_a_swapped_name_from_the_same_context_scores_higher(
    detector: LocalFactuality, question: str, faithful: str, edited: str
) -> None:
    good = await detector.evaluate(case(faithful, question=question))
    bad = await detector.evaluate(case(edited, question=question))
    assert bad.score > good.score


async def test_minimal_edit_flips_the_label(detector: LocalFactuality) -> None:
    assert (await detector.evaluate(case("Paris"))).label == "hallucinated"


async def test_a_sentence_copied_from_the_context_is_factual(detector: LocalFactuality) -> None:
    assert (await detector.evaluate(case(FAITHFUL))).label == "factual"


COPIES = {
    "verbatim": FAITHFUL,
    "lower case, no punctuation": "marie curie was born in warsaw in 1867",
    "two sentences": f"{FAITHFUL} She moved to Paris in 1891 to study physics at the Sorbonne.",
    "trailing clause dropped": "In 1911 she won a second Nobel Prize, in Chemistry.",
    "commas dropped": "In 1911 she won a second Nobel Prize in Chemistry for the discovery of "
    "polonium and radium.",
    "article added": "In 1903 she shared the Nobel Prize in the Physics with Pierre Curie and "
    "Henri Becquerel.",
    "all sentences": CONTEXT,
}


@pytest.mark.parametrize("answer", COPIES.values(), ids=COPIES.keys())
@pytest.mark.parametrize("contexts", [[CONTEXT], [OTHER_CONTEXT, CONTEXT]], ids=["own", "mixed"])
async def test_a_near_verbatim_copy_scores_clearly_supported(
    detector: LocalFactuality, answer: str, contexts: list[str]
) -> None:
    result = await detector.evaluate(case(answer, contexts=contexts))
    assert result.score < detector.threshold
    assert result.label == "factual"
    assert result.raw["features"]["copied"] >= 0.75


EDITED_COPIES = {
    "name swapped": EDITED,
    "number swapped": "Marie Curie was born in Warsaw in 1891.",
    "negated": "Marie Curie was not born in Warsaw in 1867.",
    "field swapped": "In 1911 she won a second Nobel Prize, in Physics, for the discovery of "
    "polonium and radium.",
    "clause added": "Marie Curie was born in Warsaw in 1867 and died in Lyon in 1950.",
}


@pytest.mark.parametrize("answer", EDITED_COPIES.values(), ids=EDITED_COPIES.keys())
async def test_an_edited_copy_is_not_taken_for_a_copy(
    detector: LocalFactuality, answer: str
) -> None:
    edited = await detector.evaluate(case(answer))
    copied = await detector.evaluate(case(FAITHFUL))
    assert edited.raw["features"]["copied"] == 0.0
    assert edited.score > copied.score


async def test_explanation_names_the_unsupported_sentence(detector: LocalFactuality) -> None:
    bad = "She later became the president of Argentina in 1955."
    result = await detector.evaluate(
        case(
            f"Marie Curie was born in Warsaw in 1867. {bad}", question="Tell me about Marie Curie."
        )
    )
    assert result.label == "hallucinated"
    assert result.unsupported == [bad]
    assert bad in result.explanation


async def test_an_oversized_case_is_refused_with_a_clear_error() -> None:
    detector = LocalFactuality(max_case_chars=1_000)
    with pytest.raises(InvalidCaseError, match="max_case_chars=1,000"):
        await detector.evaluate(case(FAITHFUL, contexts=[CONTEXT * 4]))
    assert detector.stats["cases"] == 0  # refused before the model ran
    assert (await detector.evaluate(case("Warsaw"))).label == "factual"


async def test_a_huge_question_counts_toward_the_case_size() -> None:
    """Else five megabytes of question would hold the model thread for seconds."""
    detector = LocalFactuality(max_case_chars=1_000)
    with pytest.raises(InvalidCaseError, match="question, answer and contexts"):
        await detector.evaluate(case(FAITHFUL, question="word " * 1_000))
    assert detector.stats["cases"] == 0


async def test_a_lone_surrogate_costs_no_case_of_its_batch(detector: LocalFactuality) -> None:
    """The tokenizer refuses one: the case's texts are made valid UTF-8 as it is made."""
    odd = case("Marie Curie was born in \ud800 Warsaw in 1867.")
    assert odd.output == "Marie Curie was born in ? Warsaw in 1867."
    results = await asyncio.gather(
        detector.evaluate(case(FAITHFUL)), detector.evaluate(odd), detector.evaluate(case(FAITHFUL))
    )
    assert [r.label for r in results] == ["factual", "factual", "factual"]


async def test_no_context_is_an_invalid_case(detector: LocalFactuality) -> None:
    with pytest.raises(InvalidCaseError):
        await detector.evaluate(EvalCase(input=QUESTION, contexts=[], output=FAITHFUL))
    with pytest.raises(InvalidCaseError):
        detector.evaluate_batch([EvalCase(input=QUESTION, contexts=["  "], output=FAITHFUL)])


async def test_concurrent_calls_are_batched_and_match_one_by_one() -> None:
    detector = LocalFactuality()
    answers = [
        FAITHFUL,
        EDITED,
        "In 1911 she won a Nobel Prize in Chemistry.",
        "In 1911 she won a Nobel Prize in Literature.",
    ]
    cases = [case(answers[i % len(answers)]) for i in range(64)]
    alone = [detector.evaluate_batch([c])[0] for c in cases[: len(answers)]]
    before = dict(detector.stats)
    together = await asyncio.gather(*(detector.evaluate(c) for c in cases))
    batches = detector.stats["batches"] - before["batches"]
    assert detector.stats["cases"] - before["cases"] == 64
    assert batches <= 2  # the concurrent calls were gathered, not run one by one
    for index, result in enumerate(together):
        reference = alone[index % len(answers)]
        # A case's score does not depend on which other cases shared its batch.
        assert (result.score, result.label) == (reference.score, reference.label)


async def test_event_loop_stays_responsive_while_the_model_runs(detector: LocalFactuality) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    task = asyncio.create_task(ticker())
    await asyncio.gather(*(detector.evaluate(case(FAITHFUL)) for _ in range(48)))
    task.cancel()
    assert ticks > 0


@pytest.mark.slow
async def test_long_context_and_long_answer_are_read_whole(detector: LocalFactuality) -> None:
    filler = [
        f"On day {i} the council of district {i % 37} discussed road repairs and school meals."
        for i in range(1, 340)
    ]
    needle = "The lighthouse at Kessel Point was finished in 1874 by engineer Ada Lindqvist."
    context = " ".join([*filler, needle])
    assert len(context.split()) > 4500
    answer_sentences = [filler[i] for i in range(0, 330, 11)]
    faithful = " ".join([*answer_sentences, needle])
    edited = " ".join([*answer_sentences, needle.replace("Ada Lindqvist", "Henrik Olsen")])
    question = "Summarise the records."
    good, bad = detector.evaluate_batch(
        [
            EvalCase(input=question, contexts=[context], output=faithful),
            EvalCase(input=question, contexts=[context], output=edited),
        ]
    )
    assert len(good.raw["sentence_scores"]) == len(answer_sentences) + 1
    # One model run per answer sentence, however long the context: the cost follows the
    # answer, and each sentence is read beside the part of the context that supports it.
    assert good.raw["sequences"] == len(answer_sentences) + 1
    # The only evidence for the last sentence is the last sentence of a 5000-word context:
    # the swapped name there is the edited answer's worst sentence.
    assert good.raw["sentence_scores"][-1] < bad.raw["sentence_scores"][-1]
    assert max(bad.raw["sentence_scores"]) == bad.raw["sentence_scores"][-1]
    assert bad.score > good.score


async def test_a_name_lifted_from_the_context_is_not_a_copied_claim(
    detector: LocalFactuality,
) -> None:
    # A swapped answer is often a name lifted from elsewhere in the context: no claim.
    result = await detector.evaluate(case("Pierre Curie and Henri Becquerel"))
    assert result.raw["features"]["copied"] == 0.0
    title = "Honorary Member of the Polish Academy of Sciences"
    result = await detector.evaluate(case(title, contexts=[CONTEXT, f"{title}.\n"]))
    assert result.raw["features"]["copied"] == 0.0
