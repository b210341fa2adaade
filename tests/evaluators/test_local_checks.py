"""LocalFactuality's explicit checks, read off its results: what it found wrong, and where.

Each production kind of hallucination that a literal check can see (a number, date or
name changed, a "not" added, a direction turned, two parties exchanged, a value read
from the wrong record of a tool's output or filled in where it returned null) is named
in ``raw["findings"]`` and in the explanation; the same answer written faithfully, in
other words and formats, is not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tracefact.evaluators.base import EvalCase, EvalResult
from tracefact.evaluators.local import LocalFactuality

LEASE = (
    "The Tenant may terminate this Lease on the fifth anniversary of the Term Commencement "
    "Date by giving the Landlord not less than six months' prior written notice. The break "
    "takes effect only if the Tenant has paid all Rent due. The deposit of 4,800 pounds is "
    "held by Carrow Lettings and returned within 10 days of the end of the Term."
)
NDA = (
    "On written request, the receiving party must return or destroy all Confidential "
    "Information within 10 business days. The obligations of confidentiality last for three "
    "years from the date of disclosure, and the disclosing party may seek an injunction."
)
SHIPPING = (
    "Orders placed before 2 pm ship the same day. Standard delivery takes 3 to 5 working "
    "days and costs 4.95 euros. Express delivery arrives the next day and costs 9.90 euros. "
    "Returns are free within 30 days."
)
MATCH = (
    "Millbrook took the lead in the 12th minute through a header from Callum Price. Rovers "
    "equalised just before half-time when Jordan Asante converted a penalty, and substitute "
    "Leo Hartigan scored twice in the last 15 minutes to seal the win."
)
FILMS = (
    "The Glass Orchard is a 2004 drama directed by Marta Quell and starring Jonah Pike and Ada "
    "Rusk. Nora Vale wrote Low Tide. Ivo Brandt starred in North Pier."
)
ORDERS = json.dumps(
    {
        "orders": [
            {"order_id": 4821, "status": "shipped", "total": 129.9, "tracking_number": None},
            {"order_id": 4822, "status": "pending", "total": 54.0, "tracking_number": "1Z99A"},
        ]
    }
)


@pytest.fixture(scope="module")
def detector() -> LocalFactuality:
    return LocalFactuality()


def judge(detector: LocalFactuality, context: str, answer: str, question: str = "") -> EvalResult:
    return detector.evaluate_batch([EvalCase(input=question, contexts=[context], output=answer)])[0]


def checks(result: EvalResult) -> set[str]:
    return {finding["check"] for finding in result.raw["findings"]}


FAITHFUL = [
    (SHIPPING, "Express delivery gets there the next day for 9.90 euros."),
    (SHIPPING, "If you order before 2 p.m., it ships on the same day."),
    (SHIPPING, "Standard shipping takes three to five working days."),
    (LEASE, "The deposit, 4,800 pounds, is returned within ten days after the Term ends."),
    (NDA, "Confidentiality lasts three years from disclosure."),
    (MATCH, "Jordan Asante converted a penalty before half-time, and Leo Hartigan scored twice."),
    (FILMS, "The Glass Orchard, directed by Marta Quell, stars Ada Rusk and Jonah Pike."),
    (FILMS, "Low Tide is by Nora Vale."),
    ("Training Day stars Peter Greene.", "Peter Greene starred in Training Day."),
    ("Low Tide was written by Nora Vale.", "Nora Vale wrote Low Tide."),
    ("The cause of the outage is still unclear.", "It is still not clear what caused the outage."),
    ("The replacement part is unavailable until March.", "The part is not available until March."),
    (
        "Versions 2.x are not affected because they do not include the upload feature.",
        "Versions 2.x aren't affected, since they lack the upload feature.",
    ),
    (
        MATCH,
        "Rovers fell behind to a 12th-minute Callum Price header, levelled through a Jordan "
        "Asante penalty just before half-time, and then won it thanks to two late goals from "
        "substitute Leo Hartigan.",
    ),
    (
        ORDERS,
        "Order 4821 has shipped and its total is 129.90, but there is no tracking number yet.",
    ),
]


@pytest.mark.parametrize(("context", "answer"), FAITHFUL)
def test_a_faithful_restatement_has_no_finding(
    detector: LocalFactuality, context: str, answer: str
) -> None:
    result = judge(detector, context, answer)
    assert result.raw["findings"] == []


@pytest.mark.parametrize(
    ("context", "answer"),
    [
        (
            "Lists are mutable, so a list cannot be used as a dictionary key.",
            "Lists are mutable; therefore lists can't be dictionary keys.",
        ),
        ("The clock was running 7 minutes fast.", "The clock was seven minutes fast."),
    ],
)
def test_words_a_restatement_adds_freely_are_not_missing(
    detector: LocalFactuality, context: str, answer: str
) -> None:
    """Connectives, a negation's spelling, a plural and a number in words claim nothing new."""
    features = judge(detector, context, answer).raw["features"]
    assert features["missing_words"] == features["missing_words_aligned"] == 0.0


WRONG = [
    ("number", SHIPPING, "Express delivery arrives the next day and costs 12.90 euros."),
    ("number", SHIPPING, "Standard delivery takes five to eight working days."),
    ("number", LEASE, "The deposit of 4,800 pounds is returned within 30 days of the Term's end."),
    ("name", LEASE, "The deposit is held by Brightwell Estates."),
    ("negation", SHIPPING, "Returns are not free within 30 days."),
    ("negation", "The part is unavailable until March.", "The part is available until March."),
    ("direction", SHIPPING, "Orders placed after 2 pm ship the same day."),
    (
        "direction",
        "Varn is the capital and largest city of Oskel, and Tarra has its largest port.",
        "Varn is the capital and smallest city of Oskel, and Tarra has its largest port.",
    ),
    (
        "direction",
        "The Sheikh Zayed Grand Mosque, in Abu Dhabi, is the biggest in the Middle East.",
        "The Sheikh Zayed Grand Mosque, in Abu Dhabi, is the smallest in the Middle East.",
    ),
    ("roles", NDA, "On request, the disclosing party must return all Confidential Information."),
    ("roles", MATCH, "Rovers equalised before half-time, when Leo Hartigan converted a penalty."),
    ("roles", FILMS, "The Glass Orchard was directed by Jonah Pike and stars Marta Quell."),
    ("roles", FILMS, "Nora Vale starred in Low Tide."),
    ("roles", "Peter Greene starred in Training Day.", "Peter Greene wrote Training Day."),
    ("roles", "Little Women was written by Ada Rusk.", "Ada Rusk starred in Little Women."),
    ("number", ORDERS, "Order 4821 has shipped and its total is 54.00."),
    ("code", ORDERS, "Order 4821 has shipped; its tracking number is 1Z99A."),
]  # fmt: skip


@pytest.mark.parametrize(("check", "context", "answer"), WRONG)
def test_a_wrong_fact_is_found_and_explained(
    detector: LocalFactuality, check: str, context: str, answer: str
) -> None:
    result = judge(detector, context, answer)
    assert check in checks(result), result.raw["findings"]
    if result.label == "hallucinated":
        reason = next(f["reason"] for f in result.raw["findings"] if f["check"] == check)
        assert reason in result.explanation


def test_a_value_from_elsewhere_in_the_contexts_is_told_apart_from_an_invented_one(
    detector: LocalFactuality,
) -> None:
    elsewhere = judge(detector, SHIPPING, "Standard delivery costs 9.90 euros.")
    invented = judge(detector, SHIPPING, "Standard delivery costs 7.50 euros.")
    assert [f["reason"] for f in elsewhere.raw["findings"]] == [
        "'9.90' is in the contexts, but not where this is said"
    ]
    assert [f["reason"] for f in invented.raw["findings"]] == ["'7.50' is in no context"]


RATES = [
    "The Central Bank of Marovia raised its main policy rate by 0.5 percentage points to "
    "6.25% on Thursday. Governor Ilse Varga said the committee was determined to return "
    "inflation to its 3% target within two years. The decision was taken by a vote of five "
    "to two.",
    "Annual consumer price inflation in Marovia was 7.4% in September, down from a peak of "
    "9.1% in April. Core inflation, which excludes food and energy, rose slightly to 6.2%. "
    "Unemployment was steady at 4.1%.",
]


def test_a_value_fused_from_another_passage_is_told_apart_from_one_swapped_in(
    detector: LocalFactuality,
) -> None:
    question = "Why did Marovia's central bank raise rates?"
    fused = detector.evaluate_batch(
        [
            EvalCase(
                input=question,
                contexts=RATES,
                output="Governor Ilse Varga said the aim is to bring inflation back to the 3% "
                "target within two years; core inflation edged up to 6.2%.",
            )
        ]
    )[0]
    swapped = detector.evaluate_batch(
        [
            EvalCase(
                input=question,
                contexts=RATES,
                output="Governor Ilse Varga said the aim is to bring inflation back to the "
                "6.2% target within two years.",
            )
        ]
    )[0]
    assert [f["reason"] for f in fused.raw["findings"]] == [
        "'6.2%' is in the contexts, but in another passage than the rest of this"
    ]
    assert fused.raw["features"]["fused_values"] == 1.0
    assert [f["reason"] for f in swapped.raw["findings"]] == [
        "'6.2%' is in the contexts, but not where this is said"
    ]
    assert swapped.raw["features"]["fused_values"] == 0.0
    assert fused.score < swapped.score


MILLS = [
    "Brackley Mill Trust and Ouseburn Heritage Group announced a joint restoration plan on "
    "Monday. Under the plan, Brackley Mill, the older of the two sites, will reopen its "
    "waterwheel to visitors in May. The shared archive will be kept at Ouseburn."
]


def test_a_name_written_in_full_where_its_passage_shortens_it_is_not_misplaced(
    detector: LocalFactuality,
) -> None:
    question = "What will happen under the restoration plan?"
    full = judge(
        detector,
        MILLS[0],
        "Brackley Mill Trust, the older site, will reopen its waterwheel to visitors in May.",
        question,
    )
    swapped = judge(
        detector,
        MILLS[0],
        "Ouseburn Heritage Group, the older site, will reopen its waterwheel to visitors in May.",
        question,
    )
    assert "name" not in checks(full)
    assert "name" in checks(swapped)
    assert full.score < swapped.score


@pytest.mark.parametrize(
    "answer",
    [
        "Yes. Returns are free within 30 days. Hope this helps!",
        "I've checked. Returns are free within 30 days. Happy to dig further.",
    ],
)
def test_sentences_that_claim_nothing_are_not_judged(
    detector: LocalFactuality, answer: str
) -> None:
    result = judge(detector, SHIPPING, answer, question="Are returns free?")
    assert result.raw["sentence_scores"][0] == 0.0 and result.raw["sentence_scores"][2] == 0.0
    assert result.label == "factual"
    # No score weighs them, so the model spends no run on them: one run, the claim's.
    assert result.raw["sequences"] == 1


def test_names_and_numbers_the_question_gave_are_not_claims(detector: LocalFactuality) -> None:
    result = judge(
        detector,
        SHIPPING,
        "For your 3 items, Maria, standard delivery takes 3 to 5 working days.",
        question="Hi, I'm Maria and I'm ordering 3 items. How long is standard delivery?",
    )
    assert result.raw["findings"] == []


PLAYERS = [
    "Mats Hummels is a German professional footballer who plays as a central defender.",
    "Mathieu Flamini is a French professional footballer who plays as a midfielder.",
]


def test_a_name_said_with_its_own_clause_from_a_neighbouring_sentence_is_not_misplaced(
    detector: LocalFactuality,
) -> None:
    fused = judge(
        detector,
        MATCH,
        "Rovers fell behind to a 12th-minute Callum Price header, then levelled through a "
        "Jordan Asante penalty and won it with two late goals from substitute Leo Hartigan.",
    )
    swapped = detector.evaluate_batch(
        [
            EvalCase(
                input="",
                contexts=PLAYERS,
                output="Mathieu Flamini is a German professional footballer who plays as a "
                "midfielder.",
            )
        ]
    )[0]
    assert "name" not in checks(fused), fused.raw["findings"]
    assert "name" in checks(swapped)


TOOL_ANSWERS = [
    (
        "incidents.get ->\nincident_id: INC-9860\nstatus: identified\nmetrics.p95_latency_ms: 902",
        "How bad is latency in INC-9860?",
        "P95 latency is at 902 ms.",
    ),
    (
        json.dumps({"booking_ref": "VQL4OY", "flight": "QK 2993", "gate": None, "seat": "28E"}),
        "What's my seat on QK 2993?",
        "You're in seat 28E.",
    ),
    (
        "subscription_id | customer | status | payment_method\n"
        "sub_1 | Oakhurst Logistics | paused | Amex ending 8158\n"
        "sub_2 | Umberfield Systems | active | Visa ending 9946",
        "What card is Umberfield Systems's subscription paid with?",
        "Umberfield Systems' subscription is paid with the Visa ending 9946.",
    ),
    (
        'get_order(order_id="#100722") ->\n'
        "#100722 — status: shipped; total: 243.27 EUR; carrier: PostNL; city: Leipzig",
        "What did Order #100722 cost?",
        "Order #100722's total is €243.27.",
    ),
    (
        "transaction_id | merchant | amount | card_last4\n"
        "TX9186332 | Pixelhouse Electronics | 192.15 EUR | 8437\n"
        "TX3715124 | Saffron Kitchen | 543.52 GBP | 0305\n"
        "TX9522339 | Greenleaf Pharmacy | 319.57 GBP | 9081",
        "Can you give me an update on the Saffron Kitchen payment?",
        "The Saffron Kitchen payment's amount is £543.52. It was made with the card ending 0305.",
    ),
    (
        json.dumps(
            [
                {"customer": "Brightwater Capital", "status": "past due", "next": "2025-03-13"},
                {"customer": "Umberfield Media", "status": "trialing", "next": "2025-03-09"},
            ]
        ),
        "When is Umberfield Media's subscription billed next?",
        "The subscription's next invoice is due on March 9.",
    ),
]
"""Right answers over tool output that earlier versions flagged: an id inside a field's
name, a seat letter, "paid with", a call's heading above its one record, a field name
with a digit in a table's header, a sentence about the record the question names."""


@pytest.mark.parametrize(
    ("context", "question", "answer"),
    TOOL_ANSWERS,
    ids=[
        "id-in-a-field-name",
        "seat-letter",
        "paid-with",
        "heading-over-a-record",
        "header-digit",
        "record-the-question-names",
    ],
)
def test_a_right_answer_over_tool_output_has_no_finding(
    detector: LocalFactuality, context: str, question: str, answer: str
) -> None:
    result = judge(detector, context, answer, question)
    assert result.raw["findings"] == []


LARKSPUR = json.dumps(
    {
        "subscription_id": "sub_17834990",
        "customer": "Larkspur Capital",
        "status": "trialing",
        "seats": 105,
        "monthly_price": {"amount": 7445.0, "currency": "GBP"},
        "next_billing_date": None,
    }
)
ACCOUNTS_JSON = "crm.search_accounts() ->\n" + json.dumps(
    [
        {
            "account_id": "ACC-31725",
            "company": "Glenmoor Studios",
            "arr": {"amount": 270031.0, "currency": "EUR"},
            "renewal_date": None,
            "open_opportunities": 3,
        },
        {
            "account_id": "ACC-93938",
            "company": "Glenmoor Energy",
            "arr": {"amount": 228421.0, "currency": "EUR"},
            "renewal_date": "2025-11-21",
            "open_opportunities": 6,
        },
    ]
)


@pytest.mark.parametrize(
    ("context", "question", "answer"),
    [
        (
            LARKSPUR,
            "What does Larkspur Capital pay a month?",
            "The subscription's monthly price is £7,445.",
        ),
        (
            ACCOUNTS_JSON,
            "When does Glenmoor Studios renew? And how many open opportunities does it have?",
            "Glenmoor Studios doesn't have a renewal date recorded. It has three open "
            "opportunities.",
        ),
    ],
    ids=["amount-written-with-a-comma", "null-reported"],
)
def test_a_tools_numbers_and_nulls_are_read_as_answers_write_them(
    detector: LocalFactuality, context: str, question: str, answer: str
) -> None:
    """The model reads "7,445" and "not set" where the tool wrote 7445.0 and null."""
    assert judge(detector, context, answer, question).label == "factual"


HALDEN = (
    "Tool result (billing.get_subscription):\nsubscription_id: sub_4410\ncustomer: Halden "
    "Freight\nplan: Team\nstatus: active\nseats: 42\nmonthly_price: 4820.00 GBP\n"
    "next_billing_date: 2025-06-02"
)
INCIDENT = (
    'incidents.get(incident_id="INC-1658") ->\nINC-1658 — service: inventory-sync; status: '
    "investigating; error_rate_pct: 33.0; p95_latency_ms: 2854; on_call: Ibrahim Ulloa"
)
ORDER_TOTAL = json.dumps(
    {
        "order_id": "ORD-20417",
        "status": "shipped",
        "total": {"amount": 389.45, "currency": "EUR"},
        "placed_at": "2025-05-11",
    }
)


@pytest.mark.parametrize(
    ("context", "question", "answer", "label"),
    [
        (HALDEN, "What does Halden Freight pay?", "It costs £4,820 a month.", "factual"),
        (HALDEN, "What does Halden Freight pay?", "It costs £4,280 a month.", "hallucinated"),
        (ORDER_TOTAL, "How much was order ORD-20417?", "It came to €389.45.", "factual"),
        (ORDER_TOTAL, "How much was order ORD-20417?", "It came to €398.45.", "hallucinated"),
        (INCIDENT, "How bad is latency in INC-1658?", "It is at 2,854 ms.", "factual"),
        (INCIDENT, "How bad is latency in INC-1658?", "It is at 2,584 ms.", "hallucinated"),
    ],
    ids=[
        "code-after",
        "code-after-changed",
        "currency-field",
        "currency-field-changed",
        "unit-in-field-name",
        "unit-in-field-name-changed",
    ],
)
def test_an_amount_with_its_unit_is_read_as_answers_write_it(
    detector: LocalFactuality, context: str, question: str, answer: str, label: str
) -> None:
    """The model reads "£4,820" for 4820.00 GBP and "2,854 ms" for ``p95_latency_ms: 2854``."""
    assert judge(detector, context, answer, question).label == label


SERVICES = (
    "Tool result (monitoring.get):\n"
    "notifications-svc — state: down; error rate: 11.9; open incidents: 2\n"
    "checkout-api — state: degraded; error rate: 0.1; open incidents: 3\n"
    "billing-svc — state: healthy; error rate: 0.0; open incidents: 0\n"
    "search-api — state: degraded; error rate: 0.3; open incidents: 1"
)
ACCOUNTS = (
    "crm.get() ->\n"
    "account | plan | seats | open opportunity\n"
    "Bluefern Labs | team | 332 |\n"
    "Quarry Systems | starter | 335 | 31 extra seats\n"
    "Sable Systems | starter | 45 |\n"
    "Sable Logistics | business | 234 |"
)


@pytest.mark.parametrize(
    ("context", "counted", "miscounted"),
    [
        (
            SERVICES,
            "2 of the 4 services are degraded.",
            "2 of the 5 services are degraded.",
        ),
        (
            ACCOUNTS,
            "Two of the 4 accounts are on the starter plan.",
            "Three of the 4 accounts are on the starter plan.",
        ),
    ],
    ids=["records-a-line", "table-with-empty-cells"],
)
def test_counts_over_a_tools_records_are_checked(
    detector: LocalFactuality, context: str, counted: str, miscounted: str
) -> None:
    right = judge(detector, context, counted, question="Which ones are affected?")
    wrong = judge(detector, context, miscounted, question="Which ones are affected?")
    assert "number" not in checks(right)
    assert "number" in checks(wrong)


SUBSCRIPTIONS = json.dumps(
    {
        "count": 4,
        "results": [
            {"id": "SUB-1041", "customer": "Harbrook Studios", "status": "paused"},
            {"id": "SUB-1042", "customer": "Silverline Systems", "status": "cancelled"},
            {"id": "SUB-1043", "customer": "Valemont Analytics", "status": "cancelled"},
            {"id": "SUB-1044", "customer": "Duskfield Textiles", "status": "active"},
        ],
    }
)
ITEMS = json.dumps(
    [
        {"sku": "SKU-1", "product": "Corsa running shoes", "unit_cost": {"amount": 324.84}},
        {"sku": "SKU-2", "product": "Drift yoga mat", "unit_cost": {"amount": 60.49}},
    ]
)


@pytest.mark.parametrize(
    "answer",
    [
        "Two of your 4 subscriptions are cancelled: Silverline Systems and Valemont Analytics.",
        "Duskfield Textiles is the only active one.",
        "SUB-1042 and SUB-1043 are cancelled, so two of your four subscriptions.",
    ],
)
def test_records_listed_by_a_shared_state_are_read_together(
    detector: LocalFactuality, answer: str
) -> None:
    result = judge(detector, SUBSCRIPTIONS, answer, question="Which are cancelled?")
    assert result.raw["findings"] == []


LEAVE = json.dumps(
    [
        {"request_id": "LV-1991", "employee": "Amara Esposito", "start_date": "2025-06-29"},
        {"request_id": "LV-4621", "employee": "Greta Iqbal", "start_date": "2025-04-24"},
        {"request_id": "LV-1813", "employee": "Soren Zielinski", "start_date": "2025-05-28"},
    ]
)


@pytest.mark.parametrize(
    ("answer", "wrong"),
    [
        ("Amara Esposito's leave request starts on June 29.", None),
        ("Amara Esposito's leave request starts on April 24.", "April 24"),
        ("Her leave starts on 24 April, according to LV-1991.", "24 April"),
        ("LV-1991 starts on 29 June; Greta Iqbal's starts on 24 April.", None),
    ],
)
def test_a_value_is_read_from_the_record_the_answer_names(
    detector: LocalFactuality, answer: str, wrong: str | None
) -> None:
    """A date from another record is misplaced, however much it pulls the anchor there."""
    question = "When does Amara Esposito's leave request start?"
    result = judge(detector, LEAVE, answer, question=question)
    found = [finding["text"] for finding in result.raw["findings"]]
    assert wrong in found if wrong else found == []


BOOKINGS = (
    "Tool result (list_bookings):\n"
    "booking_ref | flight | passenger | status | gate | seat\n"
    "7ZMQAM | HX 1977 | Wren Abernethy | cancelled | D29 | 21F\n"
    "QE4EUL | NV 1383 | Rosa Brennan | cancelled | A25 | 22C\n"
    "QFP2HH | TL 2130 | Priya Okonkwo | delayed | A26 | 10A"
)


@pytest.mark.parametrize(("gate", "wrong"), [("D29", None), ("A26", "a26")])
def test_a_record_named_by_a_name_its_fields_write_so_is_the_one_read(
    detector: LocalFactuality, gate: str, wrong: str | None
) -> None:
    """A name no id holds ("HX"), which one record alone writes: the gate must be its."""
    answer = f"Flight HX 1977 leaves from gate {gate}."
    result = judge(detector, BOOKINGS, answer, question="Which gate is Flight HX 1977 at?")
    found = [finding["text"] for finding in result.raw["findings"]]
    assert wrong in found if wrong else found == []


INCIDENTS = (
    "incidents.list() ->\n"
    "incident_id | status | service | p95_latency_ms\n"
    "INC-1471 | identified | billing-scheduler | 4162\n"
    "INC-9694 | investigating | inventory-sync | 5988"
)


@pytest.mark.parametrize(
    ("context", "answer", "reason"),
    [
        (
            SUBSCRIPTIONS,
            "Silverline Systems and Valemont Analytics are active.",
            "'active' is in the contexts, but not where this is said",
        ),
        (
            SUBSCRIPTIONS,
            "Harbrook Studios is suspended.",
            "no record in the contexts is 'suspended'",
        ),
        (
            INCIDENTS,
            "Only one of your two incidents is monitoring: INC-9694.",
            "no record in the contexts is 'monitoring'",
        ),
    ],
)
def test_a_state_flipped_or_invented_is_found(
    detector: LocalFactuality, context: str, answer: str, reason: str
) -> None:
    result = judge(detector, context, answer, question="Which are cancelled?")
    assert reason in [f["reason"] for f in result.raw["findings"]]


@pytest.mark.parametrize("opening", ["The two items come to", "Together, the 2 items come to"])
def test_a_sum_over_nested_values_is_checked(detector: LocalFactuality, opening: str) -> None:
    right = judge(detector, ITEMS, f"{opening} 385.33.", "What do the items come to?")
    wrong = judge(detector, ITEMS, f"{opening} 395.33.", "What do the items come to?")
    assert right.raw["findings"] == []
    assert [finding["check"] for finding in wrong.raw["findings"]] == ["number"]


ORDER_LIST = "list_orders() ->\n" + json.dumps(
    [
        {
            "order_id": number,
            "total": {"amount": amount, "currency": "GBP"},
            "status": status,
            "item_count": items,
            "shipment": {
                "carrier": carrier, "tracking_number": tracking, "estimated_delivery": due
            },
            "shipping_address": {"city": city},
        }
        for number, amount, status, items, carrier, tracking, due, city in [
            ("A-20559", 752.6, "on hold", 6, "DHL", "6Q725718285", "2025-04-13", "Ghent"),
            ("ORD-785619", 773.23, "on hold", 7, "FedEx", "RU131607726", "2025-05-08", "Leipzig"),
            ("ORD-591618", 700.24, "out for delivery", 4, "DPD", "DH203537776", "2025-05-07",
             "Seville"),
            ("#107555", 896.7, "out for delivery", 4, "UPS", "8E033412617", "2025-03-28", "Ghent"),
            ("A-01134", 211.9, "on hold", 3, "FedEx", "2X041187170", "2025-03-15", "Bilbao"),
        ]
    ],
    separators=(",", ":"),
)  # fmt: skip


@pytest.mark.parametrize(
    ("total", "label"), [("3,334.67", "factual"), ("3,343.67", "hallucinated")]
)
def test_a_sentence_that_states_a_lists_sum_is_read_against_its_summary_line(
    detector: LocalFactuality, total: str, label: str
) -> None:
    """Its words ("together", "orders", "pounds") are on no line: its sum is on one only."""
    answer = f"Here's what I found. Together, the five orders come to {total} pounds."
    assert judge(detector, ORDER_LIST, answer, "What's the total of the orders?").label == label


APPOINTMENTS = "clinic.list_appointments() ->\n" + json.dumps(
    [
        {
            "appointment_id": f"APT-{number}",
            "patient": patient,
            "type": kind,
            "status": status,
            "starts_at": starts,
            "practitioner": doctor,
            "clinic": at,
            "room": room,
        }
        for number, patient, kind, status, starts, doctor, at, room in [
            (29580, "Jasper Rasmussen", "vaccination", "pending", "2025-03-23T21:55:00Z",
             "Dr Grünewald", "Seville clinic", "4.13"),
            (76734, "Farah Castellano", "physiotherapy session", "rescheduled",
             "2025-04-30T15:45:00Z", "Dr Holloway", "Malmo clinic", "4.05"),
            (84668, "Kaito Kowalczyk", "vaccination", "rescheduled", "2025-03-18T18:40:00Z",
             "Dr Quinlan", "Lyon clinic", "2.18"),
            (2673, "Niall Quinlan", "follow-up", "cancelled", "2025-03-29T08:10:00Z",
             "Dr Nakamura", "Seville clinic", "4.21"),
            (22779, "Hana Baptiste", "check-up", "pending", "2025-04-15T11:25:00Z",
             "Dr Thorne", "Dundee clinic", "2.21"),
            (39582, "Esme Baptiste", "vaccination", "cancelled", "2025-04-30T10:10:00Z",
             "Dr Vasquez", "Cardiff clinic", "4.10"),
        ]
    ]
)  # fmt: skip


@pytest.mark.parametrize(
    "answer",
    [
        "Hana Baptiste's check-up is at 11:25 on 15 April.",
        "Hana Baptiste's check-up is on April 15, 2025 at 11:25.",
    ],
)
def test_a_date_written_out_is_read_in_an_iso_timestamp(
    detector: LocalFactuality, answer: str
) -> None:
    """A tool's ISO timestamp reads as the date the answer writes: no word of it is missing."""
    result = judge(detector, APPOINTMENTS, answer, question="When is Hana's appointment?")
    assert result.raw["findings"] == []
    assert result.raw["features"]["missing_words_aligned"] == 0.0
    wrong = judge(detector, APPOINTMENTS, answer.replace("15", "16"), "When is it?")
    assert "date" in checks(wrong)


_SUPPORT_OF = """
import json, sys
from tracefact.evaluators._text import split_sentences
from tracefact.evaluators.local.alignment import Evidence, support
question, context, answer = json.loads(sys.stdin.read())
found = support(Evidence.of([context]), question, split_sentences(answer))
print(json.dumps([[s.aligned, s.ranked, [f.reason for f in s.findings], s.row] for s in found]))
"""


def test_the_same_case_is_judged_alike_in_every_process() -> None:
    """Alike whatever the hash seed, which orders the sets whose word weights are summed.

    A sum's last bits decide ties between units, and so what a sentence is anchored to.
    """
    case = json.dumps(
        [
            "Who is Hana Baptiste's appointment with?",
            APPOINTMENTS,
            "I've checked. Hana Baptiste's appointment is with Dr Thorne. "
            "Anything else I can check?",
        ]
    )
    seen = {
        subprocess.run(
            [sys.executable, "-c", _SUPPORT_OF],
            input=case,
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        ).stdout
        for seed in range(6)
    }
    assert len(seen) == 1, seen
