"""Tool-output cases for the LocalFactuality dev set (see ``factuality_devset.py``).

Every case is an assistant answer over the results of tool calls: JSON records (pretty or
compact), lists of records, nested objects with nulls, plain-text tool output, and sequences of
tool results where a later one supersedes an earlier one. Records, names, ids and amounts are
invented from a seeded random generator, so memory cannot answer.

As for prose, an answer plan (which fields, which phrasing, which context layout) is drawn the
same way whatever the label; a hallucinated case then gets exactly one wrong statement: a value
read from another record (``wrong_record``), a value invented where the tool returned null
(``null_filled``), a status flipped to another valid status (``status_flip``), an earlier,
superseded result used (``superseded``), or a changed number, amount or date
(``number_change``). Factual kinds: ``field_lookup``, ``multi_field``, ``list_summary``,
``latest_result``, ``null_reported``.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import random
import re
import string
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

FACTUAL = "factual"
HALLUCINATED = "hallucinated"

FACTUAL_TOOL_KINDS = [
    "field_lookup",
    "multi_field",
    "list_summary",
    "latest_result",
    "null_reported",
]
FACTUAL_TOOL_WEIGHTS = [0.22, 0.22, 0.2, 0.18, 0.18]
HALLUCINATED_TOOL_KINDS = [
    "wrong_record",
    "null_filled",
    "status_flip",
    "superseded",
    "number_change",
]

# ---------------------------------------------------------------------------------------------
# Invented values
# ---------------------------------------------------------------------------------------------

GIVEN = (
    "Amara Bruno Chiara Dmitri Elif Farah Gideon Hana Ibrahim Jonas Kaito Leona Mateo Nadia "
    "Oskar Priya Quentin Rosa Soren Talia Umar Vera Wendell Ximena Yusuf Zofia Anouk Bastian "
    "Celeste Darius Esme Fintan Greta Hugo Ines Jasper Kamala Lucien Maren Niall Odile Pavel "
    "Rhea Silas Tomasz Ulla Viktor Wren Yara Anselm Bettina Corin Delphine Emeka Freya"
).split()
FAMILY = (
    "Abernethy Baptiste Castellano Dunmore Eriksen Fairweather Gallagher Holloway Iqbal "
    "Jankowski Kowalczyk Lindqvist Marchetti Nakamura Okonkwo Pemberton Quinlan Rasmussen "
    "Szabo Thorne Ulloa Vasquez Whitlock Yilmaz Zielinski Achterberg Brennan Cardoso Delacroix "
    "Esposito Fitzgerald Grünewald Halvorsen Ivanova Jaramillo Kinsella Lachance Mbeki Novak "
    "Oyelaran Petrakis Radcliffe Sandoval Tanaka Underhill Valente Winterbourne"
).split()
COMPANY_A = (
    "Harbrook Pellmark Quillon Brightwater Corvane Duskfield Elmstead Fernhollow Glenmoor "
    "Halcyon Ironvale Juniper Kestrel Larkspur Marlow Northgate Oakhurst Pinecrest Redwater "
    "Silverline Thornbury Umberfield Valemont Westbrook"
).split()
COMPANY_B = (
    "Logistics Foods Analytics Dental Robotics Textiles Energy Media Outdoor Pharma Studios "
    "Builders Capital Labs Systems Interiors"
).split()
CITIES = (
    "Leeds Bristol Lyon Porto Ghent Utrecht Bilbao Gdansk Aarhus Turin Graz Cork Malmo Brno "
    "Tampere Leipzig Nantes Seville Bologna Krakow Rotterdam Dundee Cardiff Valencia"
).split()
PRODUCTS = [
    "Trailhead 40L backpack",
    "Aero ceramic kettle",
    "Lumen desk lamp",
    "Corsa running shoes",
    "Fjord wool blanket",
    "Vista 27-inch monitor",
    "Pico espresso grinder",
    "Nimbus rain jacket",
    "Atlas standing desk",
    "Echo wireless earbuds",
    "Sable chef's knife",
    "Drift yoga mat",
    "Halo air purifier",
    "Summit trekking poles",
    "Quartz wall clock",
    "Orbit smart speaker",
]
MERCHANTS = [
    "Fenwick Grocers",
    "Copperpot Cafe",
    "Railtrack Tickets",
    "Pixelhouse Electronics",
    "Greenleaf Pharmacy",
    "Northline Fuel",
    "Bramble Books",
    "Skyward Airlines",
    "Tidewater Utilities",
    "Lantern Cinema",
    "Marlowe Hardware",
    "Cobalt Gym",
    "Saffron Kitchen",
    "Meridian Hotels",
    "Parcelpoint",
    "Oakridge Florist",
]
TICKET_SUBJECTS = [
    "Cannot export invoices to CSV",
    "SSO login loops back to the sign-in page",
    "Webhook deliveries failing with 502",
    "Duplicate charge on March invoice",
    "Mobile app crashes on photo upload",
    "Password reset email never arrives",
    "API rate limit lower than contracted",
    "Dashboard shows stale data",
    "Cannot add a new team member",
    "Report scheduler skipped Monday run",
]
SERVICES = [
    "checkout-api",
    "payments-gateway",
    "search-indexer",
    "auth-service",
    "notification-worker",
    "inventory-sync",
    "media-transcoder",
    "billing-scheduler",
    "graphql-edge",
    "ledger-writer",
]
ROOT_CAUSES = [
    "an expired TLS certificate on the internal load balancer",
    "a connection-pool leak introduced in the last deploy",
    "a misconfigured feature flag that disabled caching",
    "disk saturation on the primary database replica",
    "a DNS change that pointed traffic at a drained cluster",
    "a schema migration that locked the orders table",
]

BASE_DATE = dt.date(2025, 3, 3)


def person(rng: random.Random) -> str:
    """An invented full name."""
    return f"{rng.choice(GIVEN)} {rng.choice(FAMILY)}"


def company(rng: random.Random) -> str:
    """An invented company name."""
    return f"{rng.choice(COMPANY_A)} {rng.choice(COMPANY_B)}"


def code(rng: random.Random, prefix: str, digits: int = 5) -> str:
    """An identifier: ``prefix`` and ``digits`` random digits."""
    return prefix + "".join(rng.choice(string.digits) for _ in range(digits))


def letters_code(rng: random.Random, n: int = 6) -> str:
    """A booking-reference-like code of capitals and digits."""
    return "".join(rng.choice(string.ascii_uppercase + "23456789") for _ in range(n))


def date_value(rng: random.Random, spread: int = 120) -> str:
    """An ISO date within ``spread`` days of BASE_DATE."""
    return (BASE_DATE + dt.timedelta(days=rng.randint(0, spread))).isoformat()


def datetime_value(rng: random.Random, spread: int = 120) -> str:
    """An ISO UTC timestamp within ``spread`` days of BASE_DATE."""
    day = BASE_DATE + dt.timedelta(days=rng.randint(0, spread))
    minute = rng.choice(range(0, 60, 5))
    return f"{day.isoformat()}T{rng.randint(6, 21):02d}:{minute:02d}:00Z"


def money_value(rng: random.Random, lo: float, hi: float, currency: str = "") -> dict[str, Any]:
    """An amount with its currency, as APIs return it."""
    amount = round(rng.uniform(lo, hi), 2 if hi < 5000 else 0)
    return {"amount": amount, "currency": currency or rng.choice(["EUR", "GBP", "USD"])}


# ---------------------------------------------------------------------------------------------
# Formatting values in answers
# ---------------------------------------------------------------------------------------------

CURRENCY_SIGN = {"EUR": "€", "GBP": "£", "USD": "$"}
CURRENCY_WORD = {"EUR": "euros", "GBP": "pounds", "USD": "dollars"}
SMALL_WORDS = "zero one two three four five six seven eight nine ten".split()


@dataclass
class Style:
    """How one case writes dates, amounts and numbers (drawn per case, label-blind)."""

    date: str  # dmy, mdy, dmy_year, weekday
    money: str  # sign, word
    small_numbers_as_words: bool


def draw_style(rng: random.Random) -> Style:
    """Draw the formatting style of one answer."""
    return Style(
        rng.choice(["dmy", "mdy", "dmy_year", "weekday"]),
        rng.choice(["sign", "sign", "word"]),
        rng.random() < 0.4,
    )


def fmt_date(iso: str, style: Style) -> str:
    """An ISO date as an answer writes it ("14 May", "May 14", ...)."""
    d = dt.date.fromisoformat(iso[:10])
    month = d.strftime("%B")
    if style.date == "mdy":
        return f"{month} {d.day}"
    if style.date == "dmy_year":
        return f"{d.day} {month} {d.year}"
    if style.date == "weekday":
        return f"{d.strftime('%A')}, {d.day} {month}"
    return f"{d.day} {month}"


def fmt_datetime(iso: str, style: Style) -> str:
    """An ISO timestamp as an answer writes it ("09:30 on 14 May")."""
    hour, minute = int(iso[11:13]), int(iso[14:16])
    clock = f"{hour:02d}:{minute:02d}"
    if style.date == "mdy":
        clock = f"{(hour - 1) % 12 + 1}:{minute:02d} {'am' if hour < 12 else 'pm'}"
    return f"{clock} on {fmt_date(iso, style)}"


def fmt_money(value: dict[str, Any], style: Style) -> str:
    """An amount as an answer writes it ("€1,249.50", "1,249.50 euros")."""
    amount = float(value["amount"])
    text = f"{amount:,.2f}" if amount % 1 else f"{amount:,.0f}"
    if style.money == "word":
        return f"{text} {CURRENCY_WORD[value['currency']]}"
    return CURRENCY_SIGN[value["currency"]] + text


def fmt_int(value: int, style: Style) -> str:
    """A count, in words for small numbers when the style says so."""
    if style.small_numbers_as_words and 0 <= value <= 10:
        return SMALL_WORDS[value]
    return f"{value:,}"


# ---------------------------------------------------------------------------------------------
# Domains
# ---------------------------------------------------------------------------------------------


@dataclass
class FieldSpec:
    """One field of a domain's records, and how answers and questions talk about it.

    Templates use ``{S}`` (the subject at the start of a sentence: "Order A-48213", "It"),
    ``{Sp}`` (its possessive: "Order A-48213's", "Its"), ``{s}`` (the subject inside a
    question) and ``{v}`` (the formatted value).
    """

    key: str
    kind: str  # enum, money, int, date, datetime, pct, text
    gen: Callable[[random.Random], Any]
    says: list[str]
    asks: list[str]
    null_says: list[str] = field(default_factory=list)
    nullable: bool = False
    values: tuple[str, ...] = ()
    changes: bool = False  # may change between two calls of the same tool
    unit: str = ""

    @property
    def numeric(self) -> bool:
        """Whether the field holds a number, amount, percentage, date or time."""
        return self.kind in {"money", "int", "date", "datetime", "pct"}


@dataclass
class Domain:
    """A kind of record (orders, flights, ...) with its fields, tools and phrasing."""

    name: str
    noun: str
    plural: str
    id_key: str
    make_id: Callable[[random.Random], str]
    subject: Callable[[dict[str, Any]], str]  # full subject ("Order A-48213")
    short: str  # "the order"
    tool: str
    list_tool: str
    fields: list[FieldSpec]
    extra: Callable[[random.Random, dict[str, Any]], None] = lambda rng, r: None

    def spec(self, key: str) -> FieldSpec:
        """The field spec with this key."""
        return next(f for f in self.fields if f.key == key)

    def make_record(self, rng: random.Random) -> dict[str, Any]:
        """A new invented record with all fields set."""
        record: dict[str, Any] = {}
        set_path(record, self.id_key, self.make_id(rng))
        for spec in self.fields:
            set_path(record, spec.key, spec.gen(rng))
        self.extra(rng, record)
        return record

    def id_of(self, record: dict[str, Any]) -> str:
        """The record's identifier."""
        return str(get_path(record, self.id_key))


def get_path(record: dict[str, Any], key: str) -> Any:
    """The value at a dotted ``key`` of a nested record (None when absent)."""
    node: Any = record
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def set_path(record: dict[str, Any], key: str, value: Any) -> None:
    """Set the value at a dotted ``key`` of a nested record."""
    parts = key.split(".")
    node = record
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def enum(values: list[str]) -> Callable[[random.Random], str]:
    """A generator picking one of ``values``."""
    return lambda rng: rng.choice(values)


def count(lo: int, hi: int) -> Callable[[random.Random], int]:
    """A count that is never 1 ("1 replies" would need singular templates)."""
    return lambda rng: rng.choice([v for v in range(lo, hi + 1) if v != 1])


def _order_dates(rng: random.Random, record: dict[str, Any]) -> None:
    """Make the delivery estimate fall after the order date."""
    placed = dt.date.fromisoformat(record["placed_at"])
    if record["shipment"]["estimated_delivery"] is not None:
        eta = placed + dt.timedelta(days=rng.randint(2, 12))
        record["shipment"]["estimated_delivery"] = eta.isoformat()


def _ticket_dates(rng: random.Random, record: dict[str, Any]) -> None:
    """Make the SLA deadline fall after the ticket was opened."""
    created = dt.datetime.fromisoformat(record["created_at"].replace("Z", "+00:00"))
    if record["sla_due"] is not None:
        due = created + dt.timedelta(hours=rng.choice([4, 8, 24, 48, 72]))
        record["sla_due"] = due.strftime("%Y-%m-%dT%H:%M:00Z")


def _orders() -> Domain:
    """Web-shop orders with a nested shipment."""
    statuses = ["processing", "shipped", "out for delivery", "delivered", "on hold", "cancelled"]
    carriers = ["DHL", "UPS", "FedEx", "DPD", "GLS", "PostNL", "Evri"]
    return Domain(
        name="orders",
        noun="order",
        plural="orders",
        id_key="order_id",
        make_id=lambda rng: rng.choice(
            [code(rng, "A-"), code(rng, "#10", 4), code(rng, "ORD-", 6)]
        ),
        subject=lambda r: f"Order {r['order_id']}",
        short="the order",
        tool="get_order",
        list_tool="list_orders",
        extra=_order_dates,
        fields=[
            FieldSpec(
                "status",
                "enum",
                enum(statuses),
                ["{S} is currently {v}.", "{Sp} status is {v}.", "{S} shows as {v}."],
                ["What's the status of {s}?", "Where is {s} at?"],
                values=tuple(statuses),
                changes=True,
            ),
            FieldSpec(
                "total",
                "money",
                lambda rng: money_value(rng, 12, 900),
                ["{S} came to {v}.", "{Sp} total is {v}."],
                ["How much was {s}?", "What did {s} cost?"],
            ),
            FieldSpec(
                "placed_at",
                "date",
                lambda rng: date_value(rng, 60),
                ["{S} was placed on {v}.", "{S} went in on {v}."],
                ["When was {s} placed?"],
            ),
            FieldSpec(
                "item_count",
                "int",
                count(2, 9),
                ["{S} has {v} items in it.", "{S} contains {v} items."],
                ["How many items are in {s}?"],
            ),
            FieldSpec(
                "shipment.carrier",
                "enum",
                enum(carriers),
                ["{S} is going with {v}.", "{Sp} carrier is {v}."],
                ["Which carrier is handling {s}?"],
                values=tuple(carriers),
            ),
            FieldSpec(
                "shipment.tracking_number",
                "text",
                lambda rng: letters_code(rng, 2) + code(rng, "", 9),
                ["{Sp} tracking number is {v}.", "You can track {s} with {v}."],
                ["What's the tracking number for {s}?"],
                null_says=[
                    "{S} doesn't have a tracking number yet.",
                    "No tracking number has been issued for {s} yet.",
                ],
                nullable=True,
            ),
            FieldSpec(
                "shipment.estimated_delivery",
                "date",
                lambda rng: date_value(rng, 90),
                ["{S} should arrive on {v}.", "{Sp} estimated delivery date is {v}."],
                ["When will {s} arrive?", "What's the delivery estimate for {s}?"],
                null_says=[
                    "There's no delivery estimate for {s} yet.",
                    "{S} doesn't have an estimated delivery date yet.",
                ],
                nullable=True,
                changes=True,
            ),
            FieldSpec(
                "shipping_address.city",
                "text",
                enum(CITIES),
                ["{S} is being delivered to {v}.", "{S} ships to {v}."],
                ["Where is {s} being delivered?"],
            ),
        ],
    )


def _distinct_route(rng: random.Random, record: dict[str, Any]) -> None:
    """Make a flight's destination differ from its origin."""
    route = record["route"]
    while route["destination"] == route["origin"]:
        route["destination"] = rng.choice(CITIES)


def _flights() -> Domain:
    """Flight bookings."""
    statuses = ["on time", "delayed", "boarding", "cancelled", "diverted"]
    return Domain(
        name="travel",
        noun="booking",
        plural="bookings",
        id_key="booking_ref",
        make_id=lambda rng: letters_code(rng, 6),
        subject=lambda r: f"Flight {r['flight']}",
        short="the flight",
        tool="get_booking",
        list_tool="list_bookings",
        extra=_distinct_route,
        fields=[
            FieldSpec(
                "flight",
                "text",
                lambda rng: (
                    f"{rng.choice(['NV', 'QK', 'TL', 'BZ', 'HX'])} {rng.randint(100, 2999)}"
                ),
                [],
                [],
            ),
            FieldSpec(
                "passenger",
                "text",
                person,
                ["The booking is in the name of {v}."],
                ["Whose name is the booking under?"],
            ),
            FieldSpec(
                "status",
                "enum",
                enum(statuses),
                ["{S} is {v}.", "{Sp} status is {v}."],
                ["Is {s} on time?", "What's the status of {s}?"],
                values=tuple(statuses),
                changes=True,
            ),
            FieldSpec(
                "route.origin",
                "text",
                enum(CITIES),
                ["{S} departs from {v}."],
                ["Where does {s} leave from?"],
            ),
            FieldSpec(
                "route.destination",
                "text",
                enum(CITIES),
                ["{S} flies to {v}."],
                ["Where does {s} go?"],
            ),
            FieldSpec(
                "departure",
                "datetime",
                lambda rng: datetime_value(rng, 90),
                ["{S} is scheduled to leave at {v}.", "{Sp} departure time is {v}."],
                ["When does {s} leave?"],
                changes=True,
            ),
            FieldSpec(
                "gate",
                "text",
                lambda rng: f"{rng.choice('ABCDE')}{rng.randint(1, 48)}",
                ["{S} leaves from gate {v}.", "{Sp} gate is {v}."],
                ["Which gate is {s} at?"],
                null_says=["No gate has been assigned to {s} yet.", "{S} doesn't have a gate yet."],
                nullable=True,
                changes=True,
            ),
            FieldSpec(
                "seat",
                "text",
                lambda rng: f"{rng.randint(1, 38)}{rng.choice('ABCDEF')}",
                ["Your seat on {s} is {v}.", "You're in seat {v}."],
                ["What's my seat on {s}?"],
                null_says=[
                    "You don't have a seat assigned on {s} yet.",
                    "No seat has been allocated yet.",
                ],
                nullable=True,
            ),
            FieldSpec(
                "baggage_kg",
                "int",
                lambda rng: rng.choice([15, 20, 23, 25, 30, 32]),
                [
                    "Your checked baggage allowance is {v} kg.",
                    "You can check in {v} kg of luggage.",
                ],
                ["How much baggage can I check on {s}?"],
                unit="kg",
            ),
        ],
    )


def _tickets() -> Domain:
    """Support tickets."""
    statuses = ["open", "pending", "in progress", "waiting on customer", "resolved"]
    priorities = ["low", "normal", "high", "urgent"]
    return Domain(
        name="support_ticket",
        noun="ticket",
        plural="tickets",
        id_key="ticket_id",
        make_id=lambda rng: code(rng, "SUP-"),
        subject=lambda r: f"Ticket {r['ticket_id']}",
        short="the ticket",
        tool="get_ticket",
        list_tool="search_tickets",
        extra=_ticket_dates,
        fields=[
            FieldSpec(
                "subject",
                "text",
                enum(TICKET_SUBJECTS),
                ["{S} is about: {v}."],
                ["What is {s} about?"],
            ),
            FieldSpec(
                "status",
                "enum",
                enum(statuses),
                ["{S} is {v}.", "{Sp} status is {v}."],
                ["What's the status of {s}?"],
                values=tuple(statuses),
                changes=True,
            ),
            FieldSpec(
                "priority",
                "enum",
                enum(priorities),
                ["{S} has {v} priority.", "{Sp} priority is {v}."],
                ["What priority is {s}?"],
                values=tuple(priorities),
                changes=True,
            ),
            FieldSpec("requester", "text", person, ["{S} was raised by {v}."], ["Who raised {s}?"]),
            FieldSpec(
                "assignee",
                "text",
                person,
                ["{S} is assigned to {v}.", "{v} is handling {s}."],
                ["Who is working on {s}?"],
                null_says=[
                    "{S} hasn't been assigned to anyone yet.",
                    "Nobody has picked up {s} yet.",
                ],
                nullable=True,
                changes=True,
            ),
            FieldSpec(
                "created_at",
                "datetime",
                lambda rng: datetime_value(rng, 60),
                ["{S} was opened at {v}."],
                ["When was {s} opened?"],
            ),
            FieldSpec(
                "sla_due",
                "datetime",
                lambda rng: datetime_value(rng, 70),
                ["{Sp} SLA deadline is {v}.", "The response is due by {v}."],
                ["When is the SLA deadline for {s}?"],
                null_says=[
                    "There's no SLA deadline set on {s}.",
                    "{S} doesn't have an SLA deadline.",
                ],
                nullable=True,
            ),
            FieldSpec(
                "reply_count",
                "int",
                count(0, 14),
                ["{S} has {v} replies so far.", "There have been {v} replies on {s}."],
                ["How many replies are on {s}?"],
            ),
        ],
    )


def _crm() -> Domain:
    """CRM accounts with a nested primary contact."""
    tiers = ["Bronze", "Silver", "Gold", "Platinum"]
    return Domain(
        name="crm",
        noun="account",
        plural="accounts",
        id_key="account_id",
        make_id=lambda rng: code(rng, "ACC-"),
        subject=lambda r: r["company"],
        short="the account",
        tool="crm.get_account",
        list_tool="crm.search_accounts",
        fields=[
            FieldSpec("company", "text", company, [], []),
            FieldSpec(
                "owner",
                "text",
                person,
                ["{S} is managed by {v}.", "{Sp} account owner is {v}."],
                ["Who owns the {s} account?"],
                changes=True,
            ),
            FieldSpec(
                "tier",
                "enum",
                enum(tiers),
                ["{S} is on the {v} tier.", "{Sp} support tier is {v}."],
                ["What tier is {s} on?"],
                values=tuple(tiers),
                changes=True,
            ),
            FieldSpec(
                "arr",
                "money",
                lambda rng: money_value(rng, 8000, 480000),
                ["{Sp} annual recurring revenue is {v}.", "{S} brings in {v} a year."],
                ["What's the ARR for {s}?"],
            ),
            FieldSpec(
                "renewal_date",
                "date",
                lambda rng: date_value(rng, 300),
                ["{S} is up for renewal on {v}.", "{Sp} contract renews on {v}."],
                ["When does {s} renew?"],
                null_says=[
                    "There's no renewal date on file for {s}.",
                    "{S} doesn't have a renewal date recorded.",
                ],
                nullable=True,
                changes=True,
            ),
            FieldSpec(
                "open_opportunities",
                "int",
                count(0, 7),
                ["{S} has {v} open opportunities.", "There are {v} open deals with {s}."],
                ["How many open opportunities does {s} have?"],
                changes=True,
            ),
            FieldSpec(
                "primary_contact.name",
                "text",
                person,
                ["{Sp} primary contact is {v}."],
                ["Who is the main contact at {s}?"],
            ),
            FieldSpec(
                "primary_contact.phone",
                "text",
                lambda rng: f"+44 {rng.randint(1100, 7999)} {rng.randint(100000, 999999)}",
                ["{Sp} main contact can be reached on {v}."],
                ["What's the phone number for {s}?"],
                null_says=[
                    "There's no phone number on file for {s}'s contact.",
                    "No phone number is recorded for {s}.",
                ],
                nullable=True,
            ),
        ],
    )


def _incidents() -> Domain:
    """Monitoring incidents with nested metrics."""
    statuses = ["investigating", "identified", "monitoring", "resolved"]
    severities = ["SEV1", "SEV2", "SEV3", "SEV4"]
    return Domain(
        name="monitoring",
        noun="incident",
        plural="incidents",
        id_key="incident_id",
        make_id=lambda rng: code(rng, "INC-", 4),
        subject=lambda r: f"Incident {r['incident_id']}",
        short="the incident",
        tool="incidents.get",
        list_tool="incidents.list",
        fields=[
            FieldSpec(
                "service",
                "text",
                enum(SERVICES),
                ["{S} affects {v}."],
                ["Which service is {s} on?"],
            ),
            FieldSpec(
                "status",
                "enum",
                enum(statuses),
                ["{Sp} status is {v}.", "{S} is currently marked {v}."],
                ["Where are we with {s}?", "What's the status of {s}?"],
                values=tuple(statuses),
                changes=True,
            ),
            FieldSpec(
                "severity",
                "enum",
                enum(severities),
                ["{S} is classed as {v}.", "{Sp} severity is {v}."],
                ["How severe is {s}?"],
                values=tuple(severities),
                changes=True,
            ),
            FieldSpec(
                "started_at",
                "datetime",
                lambda rng: datetime_value(rng, 40),
                ["{S} started at {v}."],
                ["When did {s} start?"],
            ),
            FieldSpec(
                "metrics.error_rate_pct",
                "pct",
                lambda rng: round(rng.uniform(0.4, 38.0), 1),
                ["{Sp} error rate is {v}.", "Errors are running at {v}."],
                ["What's the error rate for {s}?"],
                changes=True,
            ),
            FieldSpec(
                "metrics.p95_latency_ms",
                "int",
                lambda rng: rng.randint(180, 9400),
                ["{Sp} p95 latency is {v} ms.", "p95 latency is at {v} ms."],
                ["How bad is latency in {s}?"],
                changes=True,
                unit="ms",
            ),
            FieldSpec(
                "on_call",
                "text",
                person,
                ["{v} is the on-call engineer for {s}."],
                ["Who is on call for {s}?"],
            ),
            FieldSpec(
                "root_cause",
                "text",
                enum(ROOT_CAUSES),
                ["{Sp} root cause was {v}.", "{S} was caused by {v}."],
                ["What caused {s}?"],
                null_says=[
                    "{Sp} root cause hasn't been identified yet.",
                    "No root cause has been recorded for {s} yet.",
                ],
                nullable=True,
                changes=True,
            ),
        ],
    )


def _banking() -> Domain:
    """Card transactions."""
    statuses = ["pending", "posted", "declined", "refunded"]
    categories = ["groceries", "travel", "dining", "utilities", "shopping", "health"]
    return Domain(
        name="banking",
        noun="transaction",
        plural="transactions",
        id_key="transaction_id",
        make_id=lambda rng: code(rng, "TX", 7),
        subject=lambda r: f"The {r['merchant']} payment",
        short="the payment",
        tool="bank.get_transaction",
        list_tool="bank.list_transactions",
        fields=[
            FieldSpec("merchant", "text", enum(MERCHANTS), [], []),
            FieldSpec(
                "amount",
                "money",
                lambda rng: money_value(rng, 3, 640),
                ["{S} was for {v}.", "{Sp} amount is {v}."],
                ["How much was {s}?"],
            ),
            FieldSpec(
                "date",
                "date",
                lambda rng: date_value(rng, 45),
                ["{S} was made on {v}.", "{S} went through on {v}."],
                ["When was {s} made?"],
            ),
            FieldSpec(
                "status",
                "enum",
                enum(statuses),
                ["{S} is {v}.", "{Sp} status is {v}."],
                ["Did {s} go through?", "What's the status of {s}?"],
                values=tuple(statuses),
                changes=True,
            ),
            FieldSpec(
                "category",
                "enum",
                enum(categories),
                ["{S} is categorised as {v}."],
                ["What category is {s} in?"],
                values=tuple(categories),
            ),
            FieldSpec(
                "card_last4",
                "text",
                lambda rng: code(rng, "", 4),
                ["{S} was made with the card ending {v}."],
                ["Which card was {s} on?"],
            ),
            FieldSpec(
                "reference",
                "text",
                lambda rng: code(rng, "REF", 6),
                ["{Sp} reference is {v}."],
                ["What's the reference for {s}?"],
                null_says=[
                    "{S} doesn't have a reference attached.",
                    "No reference was recorded for {s}.",
                ],
                nullable=True,
            ),
        ],
    )


def _leave() -> Domain:
    """HR leave requests."""
    statuses = ["approved", "pending", "rejected", "cancelled"]
    kinds = ["annual", "sick", "parental", "unpaid", "study"]
    return Domain(
        name="hr",
        noun="leave request",
        plural="leave requests",
        id_key="request_id",
        make_id=lambda rng: code(rng, "LV-", 4),
        subject=lambda r: f"{r['employee']}'s leave request",
        short="the request",
        tool="hr.get_leave_request",
        list_tool="hr.list_leave_requests",
        fields=[
            FieldSpec("employee", "text", person, [], []),
            FieldSpec(
                "leave_type",
                "enum",
                enum(kinds),
                ["{S} is for {v} leave."],
                ["What kind of leave is {s}?"],
                values=tuple(kinds),
            ),
            FieldSpec(
                "status",
                "enum",
                enum(statuses),
                ["{S} is {v}.", "{Sp} status is {v}."],
                ["Has {s} been approved?", "What's the status of {s}?"],
                values=tuple(statuses),
                changes=True,
            ),
            FieldSpec(
                "start_date",
                "date",
                lambda rng: date_value(rng, 150),
                ["{S} starts on {v}."],
                ["When does {s} start?"],
                changes=True,
            ),
            FieldSpec(
                "working_days",
                "int",
                count(2, 15),
                ["{S} covers {v} working days."],
                ["How many days is {s} for?"],
                changes=True,
            ),
            FieldSpec(
                "approver",
                "text",
                person,
                ["{Sp} approver is {v}.", "{v} is the approver for {s}."],
                ["Who approves {s}?"],
                null_says=[
                    "{S} doesn't have an approver assigned yet.",
                    "No approver has been set for {s}.",
                ],
                nullable=True,
            ),
            FieldSpec(
                "balance_after_days",
                "int",
                count(0, 28),
                [
                    "After {s}, {v} days of leave remain.",
                    "{v} days of leave will be left after {s}.",
                ],
                ["How much leave is left after {s}?"],
            ),
        ],
    )


def _inventory() -> Domain:
    """Stock items."""
    return Domain(
        name="inventory",
        noun="item",
        plural="items",
        id_key="sku",
        make_id=lambda rng: code(rng, "SKU-"),
        subject=lambda r: f"The {r['product']}",
        short="the item",
        tool="inventory.lookup",
        list_tool="inventory.search",
        fields=[
            FieldSpec("product", "text", enum(PRODUCTS), [], []),
            FieldSpec(
                "on_hand",
                "int",
                count(0, 480),
                ["There are {v} units of {s} in stock.", "{S} has {v} units on hand."],
                ["How many of {s} do we have?"],
                changes=True,
            ),
            FieldSpec(
                "reserved",
                "int",
                count(0, 60),
                ["{v} units of {s} are reserved.", "{S} has {v} units reserved."],
                ["How many of {s} are reserved?"],
                changes=True,
            ),
            FieldSpec(
                "warehouse",
                "text",
                enum(CITIES),
                ["{S} is stocked in the {v} warehouse."],
                ["Where is {s} stocked?"],
            ),
            FieldSpec(
                "supplier", "text", company, ["{S} is supplied by {v}."], ["Who supplies {s}?"]
            ),
            FieldSpec(
                "unit_cost",
                "money",
                lambda rng: money_value(rng, 4, 380),
                ["{S} costs {v} per unit.", "{Sp} unit cost is {v}."],
                ["What does {s} cost us per unit?"],
            ),
            FieldSpec(
                "next_restock",
                "date",
                lambda rng: date_value(rng, 90),
                ["{S} is due to be restocked on {v}.", "{Sp} next restock is on {v}."],
                ["When is {s} being restocked?"],
                null_says=[
                    "No restock is scheduled for {s} yet.",
                    "{S} doesn't have a restock date yet.",
                ],
                nullable=True,
                changes=True,
            ),
        ],
    )


def _billing() -> Domain:
    """SaaS subscriptions."""
    statuses = ["active", "trialing", "past due", "paused", "cancelled"]
    plans = ["Starter", "Team", "Business", "Enterprise"]
    return Domain(
        name="billing",
        noun="subscription",
        plural="subscriptions",
        id_key="subscription_id",
        make_id=lambda rng: code(rng, "sub_", 8),
        subject=lambda r: f"{r['customer']}'s subscription",
        short="the subscription",
        tool="billing.get_subscription",
        list_tool="billing.list_subscriptions",
        fields=[
            FieldSpec("customer", "text", company, [], []),
            FieldSpec(
                "plan",
                "enum",
                enum(plans),
                ["{S} is on the {v} plan."],
                ["Which plan is {s} on?"],
                values=tuple(plans),
                changes=True,
            ),
            FieldSpec(
                "status",
                "enum",
                enum(statuses),
                ["{S} is {v}.", "{Sp} status is {v}."],
                ["What's the status of {s}?"],
                values=tuple(statuses),
                changes=True,
            ),
            FieldSpec(
                "seats",
                "int",
                count(2, 240),
                ["{S} has {v} seats.", "{S} covers {v} seats."],
                ["How many seats does {s} have?"],
                changes=True,
            ),
            FieldSpec(
                "monthly_price",
                "money",
                lambda rng: money_value(rng, 29, 9800),
                ["{S} costs {v} a month.", "{Sp} monthly price is {v}."],
                ["How much is {s} per month?"],
            ),
            FieldSpec(
                "next_billing_date",
                "date",
                lambda rng: date_value(rng, 40),
                ["{S} will next be billed on {v}.", "{Sp} next invoice is due on {v}."],
                ["When is {s} billed next?"],
                null_says=[
                    "There's no upcoming billing date for {s}.",
                    "{S} doesn't have a next billing date.",
                ],
                nullable=True,
            ),
            FieldSpec(
                "payment_method",
                "text",
                lambda rng: (
                    f"{rng.choice(['Visa', 'Mastercard', 'Amex'])} ending {code(rng, '', 4)}"
                ),
                ["{S} is paid with the {v}.", "{Sp} payment method is the {v}."],
                ["What card is {s} paid with?"],
                null_says=[
                    "There's no payment method on file for {s}.",
                    "{S} doesn't have a payment method saved.",
                ],
                nullable=True,
            ),
        ],
    )


def _appointments() -> Domain:
    """Clinic appointments."""
    statuses = ["confirmed", "pending", "cancelled", "rescheduled"]
    types = ["check-up", "follow-up", "dental cleaning", "physiotherapy session", "vaccination"]
    return Domain(
        name="appointments",
        noun="appointment",
        plural="appointments",
        id_key="appointment_id",
        make_id=lambda rng: code(rng, "APT-", 5),
        subject=lambda r: f"{r['patient']}'s appointment",
        short="the appointment",
        tool="clinic.get_appointment",
        list_tool="clinic.list_appointments",
        fields=[
            FieldSpec("patient", "text", person, [], []),
            FieldSpec(
                "type",
                "enum",
                enum(types),
                ["{S} is a {v}."],
                ["What is {s} for?"],
                values=tuple(types),
            ),
            FieldSpec(
                "status",
                "enum",
                enum(statuses),
                ["{S} is {v}.", "{Sp} status is {v}."],
                ["Is {s} confirmed?", "What's the status of {s}?"],
                values=tuple(statuses),
                changes=True,
            ),
            FieldSpec(
                "starts_at",
                "datetime",
                lambda rng: datetime_value(rng, 60),
                ["{S} is at {v}.", "{S} is booked for {v}."],
                ["When is {s}?"],
                changes=True,
            ),
            FieldSpec(
                "practitioner",
                "text",
                lambda rng: "Dr " + rng.choice(FAMILY),
                ["{S} is with {v}."],
                ["Who is {s} with?"],
                changes=True,
            ),
            FieldSpec(
                "clinic",
                "text",
                lambda rng: f"{rng.choice(CITIES)} clinic",
                ["{S} is at the {v}."],
                ["Which clinic is {s} at?"],
            ),
            FieldSpec(
                "room",
                "text",
                lambda rng: f"{rng.randint(1, 4)}.{rng.randint(1, 24):02d}",
                ["{S} is in room {v}.", "{Sp} room is {v}."],
                ["Which room is {s} in?"],
                null_says=[
                    "No room has been allocated for {s} yet.",
                    "{S} doesn't have a room assigned yet.",
                ],
                nullable=True,
            ),
        ],
    )


DOMAINS: list[Domain] = [
    _orders(),
    _flights(),
    _tickets(),
    _crm(),
    _incidents(),
    _banking(),
    _leave(),
    _inventory(),
    _billing(),
    _appointments(),
]


# ---------------------------------------------------------------------------------------------
# Values: formatting and changing
# ---------------------------------------------------------------------------------------------


def fmt_value(spec: FieldSpec, value: Any, style: Style) -> str:
    """A field value as an answer writes it."""
    if spec.kind == "money":
        return fmt_money(value, style)
    if spec.kind == "date":
        return fmt_date(value, style)
    if spec.kind == "datetime":
        return fmt_datetime(value, style)
    if spec.kind == "int":
        return fmt_int(int(value), style)
    if spec.kind == "pct":
        return f"{value}%"
    return str(value)


def changed_value(spec: FieldSpec, value: Any, rng: random.Random, avoid: list[Any]) -> Any:
    """A different, plausible value of the same kind (for number_change, status_flip, ...)."""
    for _ in range(20):
        if spec.kind == "enum":
            new: Any = rng.choice([v for v in spec.values if v != value])
        elif spec.kind == "money":
            factor = rng.choice([0.5, 0.8, 0.9, 1.1, 1.25, 1.5, 2.0])
            amount = float(value["amount"])
            new_amount = round(amount * factor, 2 if amount % 1 else 0)
            new = {"amount": new_amount, "currency": value["currency"]}
        elif spec.kind == "date":
            d = dt.date.fromisoformat(value)
            new = (d + dt.timedelta(days=rng.choice([-7, -3, -2, -1, 1, 2, 3, 7]))).isoformat()
        elif spec.kind == "datetime":
            base = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            shift = dt.timedelta(minutes=rng.choice([-180, -90, -60, -45, 45, 60, 90, 120, 1440]))
            new = (base + shift).strftime("%Y-%m-%dT%H:%M:00Z")
        elif spec.kind == "int":
            v = int(value)
            new = max(0, v + rng.choice([-3, -2, -1, 1, 2, 3]) * max(1, v // 10))
            new = 2 if new == 1 else new
        elif spec.kind == "pct":
            new = round(max(0.1, float(value) + rng.choice([-4.5, -2.0, -1.2, 1.3, 2.5, 5.0])), 1)
        else:
            new = spec.gen(rng)
        if new != value and new not in avoid:
            return new
    return None


# ---------------------------------------------------------------------------------------------
# Rendering tool output
# ---------------------------------------------------------------------------------------------

NULL_WORDS = ["none", "n/a", "—", "null", "not set", "(empty)"]


def _flatten(record: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Dotted (key, value) pairs of a nested record; amounts stay whole."""
    out: list[tuple[str, Any]] = []
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and not {"amount", "currency"} <= set(value):
            out += _flatten(value, name + ".")
        else:
            out.append((name, value))
    return out


def _plain(value: Any, null_word: str) -> str:
    """A value in plain-text tool output (nulls as ``null_word``)."""
    if value is None:
        return null_word
    if isinstance(value, dict) and "amount" in value:
        return f"{value['amount']:.2f} {value['currency']}"
    return str(value)


def render_record(record: dict[str, Any], style: str, null_word: str) -> str:
    """One record as pretty JSON, compact JSON, key: value lines or a one-line summary."""
    if style == "pretty":
        return json.dumps(record, indent=2, ensure_ascii=False)
    if style == "compact":
        return json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    pairs = _flatten(record)
    if style == "lines":
        return "\n".join(f"{k}: {_plain(v, null_word)}" for k, v in pairs)
    head, rest = pairs[0], pairs[1:]
    return f"{head[1]} — " + "; ".join(
        f"{k.split('.')[-1]}: {_plain(v, null_word)}" for k, v in rest
    )


def render_list(records: list[dict[str, Any]], keys: list[str], style: str, null_word: str) -> str:
    """A list of records (trimmed to ``keys``) as JSON or a text table."""
    trimmed = []
    for record in records:
        row: dict[str, Any] = {}
        for key in keys:
            set_path(row, key, copy.deepcopy(get_path(record, key)))
        trimmed.append(row)
    if style == "pretty":
        return json.dumps({"count": len(trimmed), "results": trimmed}, indent=2, ensure_ascii=False)
    if style == "compact":
        return json.dumps(trimmed, ensure_ascii=False, separators=(",", ":"))
    lines = [" | ".join(k.split(".")[-1] for k in keys)]
    for row in trimmed:
        lines.append(" | ".join(_plain(get_path(row, k), null_word) for k in keys))
    return "\n".join(lines)


def call_header(domain: Domain, arg: str, rng: random.Random, when: str = "") -> str:
    """A line introducing a tool result (call, timestamp), or nothing."""
    tool = domain.tool if arg else domain.list_tool
    call = f'{tool}({domain.id_key}="{arg}")' if arg else f"{tool}()"
    stamp = f"[{when}] " if when else ""
    return rng.choice([f"{stamp}{call} ->\n", f"{stamp}Tool result ({tool}):\n", f"{stamp}"])


# ---------------------------------------------------------------------------------------------
# Plans and statements
# ---------------------------------------------------------------------------------------------


@dataclass
class Statement:
    """One sentence of the answer about one field (or one list summary)."""

    spec: FieldSpec | None
    value: Any
    null: bool = False
    template: str = ""
    subject_form: str = "full"  # full, short, pronoun
    # alternatives for perturbations
    other_record_values: list[Any] = field(default_factory=list)
    earlier_value: Any = None
    summary: dict[str, Any] | None = None  # for list summaries


@dataclass
class ToolPlan:
    """Everything about a tool-output case that does not depend on its label."""

    domain: Domain
    base_kind: str
    contexts: list[str]
    question: str
    statements: list[Statement]
    record: dict[str, Any] | None
    style: Style
    opener: str = ""
    closer: str = ""
    prefix: str = ""


OPENERS = ["", "", "", "Sure. ", "I've checked. ", "Here's what I found. ", "Thanks for waiting. "]
CLOSERS = ["", "", "", "", " Let me know if you need anything else.", " Anything else I can check?"]
# Any plan may start this way (not only those over several calls), so the phrase says nothing.
PREFIXES = ["", "", "", "", "", "As of the latest update, ", "The most recent check shows that "]


def _subject_text(plan: ToolPlan, form: str, possessive: bool, start: bool) -> str:
    """The subject of a statement: full ("Order A-4821"), short ("the order") or "it"."""
    domain = plan.domain
    assert plan.record is not None
    full = domain.subject(plan.record)
    if form == "pronoun":
        text = "its" if possessive else "it"
    elif form == "short" or (possessive and "'s " in full):
        # "Priya Nair's leave request's status" reads badly: use "The request's status"
        text = domain.short + ("'s" if possessive else "")
    else:
        text = full + ("'s" if possessive else "")
    if start:
        text = text[:1].upper() + text[1:]
    elif text.startswith("The "):
        text = "the " + text[4:]
    return text


def render_statement(plan: ToolPlan, st: Statement) -> str:
    """The sentence for one statement."""
    if st.summary is not None:
        return render_summary(plan, st)
    assert st.spec is not None
    template = st.template
    value = fmt_value(st.spec, st.value, plan.style) if not st.null else ""
    text = template
    form = st.subject_form
    replacements = {
        "{S}": _subject_text(plan, form, False, True),
        "{Sp}": _subject_text(plan, form, True, True),
        "{s}": _subject_text(plan, "short" if form == "pronoun" else form, False, False),
        "{v}": value,
    }
    for key, rep in replacements.items():
        text = text.replace(key, rep)
    text = re.sub(r"(\w)s's\b", r"\1s'", text)
    return text[:1].upper() + text[1:]


def render_summary(plan: ToolPlan, st: Statement) -> str:
    """The sentence summarising a list (a count by status, or a total)."""
    summary = st.summary
    assert summary is not None
    domain = plan.domain
    if summary["type"] == "count":
        ids = summary["ids"]
        k, n, v = len(ids), summary["total"], summary["value"]
        id_text = ids[0] if k == 1 else ", ".join(ids[:-1]) + " and " + ids[-1]
        count = fmt_int(k, plan.style)
        total = fmt_int(n, plan.style)
        if k == 1:
            options = [
                f"Only one of your {total} {domain.plural} is {v}: {id_text}.",
                f"Just {id_text} is {v}, out of {total} {domain.plural}.",
            ]
        else:
            options = [
                f"{count.capitalize()} of your {total} {domain.plural} are {v}: {id_text}.",
                f"{id_text} are {v}, so {count} of the {total} {domain.plural}.",
            ]
        return options[int(summary["template"]) % len(options)]
    total_text = fmt_money(summary["sum"], plan.style)
    n = fmt_int(summary["total"], plan.style)
    options = [
        f"The {n} {domain.plural} listed add up to {total_text}.",
        f"Together, the {n} {domain.plural} come to {total_text}.",
    ]
    return options[int(summary["template"]) % len(options)]


_LOWER_START = frozenset(
    "The It Its There No Your You After Errors Order Flight Ticket Incident Only Just"
    " Together, Nobody Each".split()
    + [w.capitalize() for w in SMALL_WORDS]
)


def render_answer(plan: ToolPlan) -> str:
    """The whole answer: opener, optional prefix, statements, closer."""
    sentences = [render_statement(plan, st) for st in plan.statements]
    if plan.prefix:
        first = sentences[0]
        if first.split()[0] in _LOWER_START:
            first = first[:1].lower() + first[1:]
        sentences[0] = plan.prefix + first
    return (plan.opener + " ".join(sentences) + plan.closer).strip()


# ---------------------------------------------------------------------------------------------
# Building plans
# ---------------------------------------------------------------------------------------------


def _askable(domain: Domain) -> list[FieldSpec]:
    """Fields an answer can talk about and a question can ask for."""
    return [f for f in domain.fields if f.says and f.asks]


def _statement(spec: FieldSpec, record: dict[str, Any], rng: random.Random, form: str) -> Statement:
    """A statement about ``spec`` of ``record`` with a randomly chosen template."""
    value = get_path(record, spec.key)
    null = value is None
    template = rng.choice(spec.null_says if null else spec.says)
    return Statement(spec, value, null, template, form)


def _record_context(
    domain: Domain, record: dict[str, Any], rng: random.Random, others: list[dict[str, Any]]
) -> list[str]:
    """Contexts showing ``record`` alone, or in a list with ``others``."""
    style = rng.choice(["pretty", "compact", "lines", "oneline"])
    null_word = rng.choice(NULL_WORDS)
    if others:
        records = [*others, record]
        rng.shuffle(records)
        keys = [domain.id_key] + [f.key for f in domain.fields if f.says or not f.asks]
        list_style = rng.choice(["pretty", "compact", "table"])
        return [call_header(domain, "", rng) + render_list(records, keys, list_style, null_word)]
    return [
        call_header(domain, domain.id_of(record), rng) + render_record(record, style, null_word)
    ]


def _question(
    domain: Domain, record: dict[str, Any], specs: list[FieldSpec], rng: random.Random
) -> str:
    """The user's question for a plan about ``specs`` of ``record``."""
    subject = domain.subject(record)
    s = subject[:1].lower() + subject[1:] if subject.startswith("The ") else subject
    if len(specs) == 1 or rng.random() < 0.5:
        q = rng.choice(specs[0].asks).format(s=s)
        if len(specs) == 1:
            return q[:1].upper() + q[1:]
        second = rng.choice(specs[1].asks).format(s="it")
        return q[:1].upper() + q[1:] + " And " + second[:1].lower() + second[1:]
    return rng.choice(
        [
            f"Can you give me an update on {s}?",
            f"What do you have on {s}?",
            f"Give me the details for {s}.",
            f"What's the latest with {s}?",
        ]
    )


def _forms(n: int, rng: random.Random) -> list[str]:
    """Subject forms for ``n`` statements: the full name first, then mostly "it"."""
    return ["full"] + [rng.choice(["pronoun", "pronoun", "short"]) for _ in range(n - 1)]


def plan_fields(domain: Domain, base_kind: str, rng: random.Random) -> ToolPlan | None:
    """field_lookup, multi_field and null_reported plans (one record, maybe in a list).

    Only a null_reported plan has a null among the fields it talks about; other nullable
    fields of the record may be null in the context without being mentioned.
    """
    record = domain.make_record(rng)
    askable = _askable(domain)
    with_list = rng.random() < 0.4
    if not with_list:
        # alone, a record offers no other record to misread: talk about fields whose value
        # can be got wrong in other ways (numbers, dates, states)
        askable = [f for f in askable if f.numeric or f.kind == "enum" or f.nullable]
    if base_kind == "field_lookup":
        specs = rng.sample(askable, 1)
    elif base_kind == "multi_field":
        specs = rng.sample(askable, rng.choice([2, 2, 3]))
    else:
        target = rng.choice([f for f in askable if f.nullable])
        rest = [f for f in askable if f is not target]
        specs = [target, *rng.sample(rest, rng.choice([1, 1, 2]))]
        if len(specs) > 1 and rng.random() < 0.4:
            specs = specs[1:] + specs[:1]
    for spec in askable:
        if spec.nullable and spec not in specs and rng.random() < 0.3:
            set_path(record, spec.key, None)
    if base_kind == "null_reported":
        set_path(record, target.key, None)
    others = [domain.make_record(rng) for _ in range(rng.randint(2, 5))] if with_list else []
    contexts = _record_context(domain, record, rng, others)
    forms = _forms(len(specs), rng)
    statements = [
        _statement(spec, record, rng, form) for spec, form in zip(specs, forms, strict=True)
    ]
    for st in statements:
        assert st.spec is not None
        st.other_record_values = [
            v for o in others if (v := get_path(o, st.spec.key)) is not None and v != st.value
        ]
    question = _question(domain, record, specs, rng)
    return ToolPlan(domain, base_kind, contexts, question, statements, record, draw_style(rng))


def plan_list(domain: Domain, rng: random.Random) -> ToolPlan | None:
    """A list of records summarised: a count by status, or a sum of amounts."""
    n = rng.randint(3, 7)
    records = [domain.make_record(rng) for _ in range(n)]
    ids = set()
    for record in records:
        while domain.id_of(record) in ids:
            set_path(record, domain.id_key, domain.make_id(rng))
        ids.add(domain.id_of(record))
    enums = [f for f in domain.fields if f.kind == "enum" and f.says]
    money = [f for f in domain.fields if f.kind == "money"]
    style = draw_style(rng)
    name_key = _display_key(domain)
    if enums and (not money or rng.random() < 0.65):
        spec = next((f for f in enums if f.key == "status"), enums[0])
        present = Counter(get_path(r, spec.key) for r in records)
        value = rng.choice(sorted(present))
        if present[value] == n:
            return None
        matching = [str(get_path(r, name_key)) for r in records if get_path(r, spec.key) == value]
        non_matching = [
            str(get_path(r, name_key)) for r in records if get_path(r, spec.key) != value
        ]
        if len(set(matching + non_matching)) != n:
            return None
        summary = {
            "type": "count",
            "ids": matching,
            "total": n,
            "value": value,
            "others": non_matching,
            "spec": spec,
            "template": rng.randint(0, 9),
        }
        question = rng.choice(
            [
                f"How many of my {domain.plural} are {value}?",
                f"Which of my {domain.plural} are {value}?",
                f"Can you check which {domain.plural} are {value}?",
            ]
        )
    else:
        spec = money[0]
        currency = get_path(records[0], spec.key)["currency"]
        for r in records:
            get_path(r, spec.key)["currency"] = currency
        total = round(sum(float(get_path(r, spec.key)["amount"]) for r in records), 2)
        summary = {
            "type": "sum",
            "sum": {"amount": total, "currency": currency},
            "total": n,
            "template": rng.randint(0, 9),
            "spec": spec,
            "amounts": [get_path(r, spec.key) for r in records],
        }
        question = rng.choice(
            [
                f"What's the total of the {domain.plural} listed?",
                f"How much do these {domain.plural} add up to?",
                f"Can you total up my {domain.plural}?",
            ]
        )
    keys = [domain.id_key] + ([name_key] if name_key != domain.id_key else []) + [spec.key]
    keys += [f.key for f in domain.fields if f.key not in keys and f.says and rng.random() < 0.4]
    null_word = rng.choice(NULL_WORDS)
    context = call_header(domain, "", rng) + render_list(
        records, keys, rng.choice(["pretty", "compact", "table"]), null_word
    )
    statement = Statement(None, None, summary=summary)
    return ToolPlan(domain, "list_summary", [context], question, [statement], None, style)


def _display_key(domain: Domain) -> str:
    """The field that names a record in list answers (merchant, product, ...)."""
    for key in ("merchant", "product", "employee", "customer", "patient", "company", "flight"):
        if any(f.key == key for f in domain.fields):
            return key
    return domain.id_key


def plan_latest(domain: Domain, rng: random.Random) -> ToolPlan | None:
    """Two or three calls of the same tool; a later result changes one field."""
    record = domain.make_record(rng)
    changing = [f for f in domain.fields if f.changes and f.says]
    spec = rng.choice(changing)
    history = [copy.deepcopy(record)]
    for _ in range(rng.choice([1, 1, 2])):
        nxt = copy.deepcopy(history[-1])
        new = changed_value(
            spec, get_path(nxt, spec.key), rng, [get_path(h, spec.key) for h in history]
        )
        if new is None:
            return None
        set_path(nxt, spec.key, new)
        history.append(nxt)
    latest = history[-1]
    earlier = get_path(history[rng.randrange(len(history) - 1)], spec.key)
    day = BASE_DATE + dt.timedelta(days=rng.randint(0, 60))
    minutes = sorted(rng.sample(range(7 * 60, 20 * 60, 7), len(history)))
    style_name = rng.choice(["pretty", "compact", "lines", "oneline"])
    null_word = rng.choice(NULL_WORDS)
    contexts = []
    for version, minute in zip(history, minutes, strict=True):
        when = f"{day.isoformat()} {minute // 60:02d}:{minute % 60:02d}"
        contexts.append(
            call_header(domain, domain.id_of(version), rng, when)
            + render_record(version, style_name, null_word)
        )
    if rng.random() < 0.3:  # an unrelated call in between
        other = domain.make_record(rng)
        contexts.insert(
            rng.randint(1, len(contexts) - 1),
            call_header(domain, domain.id_of(other), rng)
            + render_record(other, style_name, null_word),
        )
    specs = [spec]
    extra = [f for f in _askable(domain) if f is not spec and not f.nullable]
    if extra and rng.random() < 0.5:
        specs.append(rng.choice(extra))
    if rng.random() < 0.5:
        specs.reverse()
    forms = _forms(len(specs), rng)
    statements = [_statement(s, latest, rng, form) for s, form in zip(specs, forms, strict=True)]
    for st in statements:
        if st.spec is spec:
            st.earlier_value = earlier
    question = _question(domain, latest, specs, rng)
    return ToolPlan(
        domain, "latest_result", contexts, question, statements, latest, draw_style(rng)
    )


def make_tool_plan(domain: Domain, rng: random.Random, base_kind: str) -> ToolPlan | None:
    """A label-blind plan of ``base_kind`` for ``domain``, or None when it fails."""
    if base_kind == "list_summary":
        plan = plan_list(domain, rng)
    elif base_kind == "latest_result":
        plan = plan_latest(domain, rng)
    else:
        plan = plan_fields(domain, base_kind, rng)
    if plan is None:
        return None
    plan.opener = rng.choice(OPENERS)
    plan.closer = rng.choice(CLOSERS)
    plan.prefix = rng.choice(PREFIXES)
    return plan


# ---------------------------------------------------------------------------------------------
# Tool hallucinations
# ---------------------------------------------------------------------------------------------


def t_wrong_record(plan: ToolPlan, rng: random.Random) -> bool:
    """A value read from another record of the list."""
    options = [st for st in plan.statements if st.other_record_values and not st.null]
    if options:
        st = rng.choice(options)
        st.value = rng.choice(st.other_record_values)
        return True
    for st in plan.statements:
        summary = st.summary
        if summary and summary["type"] == "count" and summary["others"]:
            ids = list(summary["ids"])
            ids[rng.randrange(len(ids))] = rng.choice(summary["others"])
            summary["ids"] = ids
            return True
    return False


def t_null_filled(plan: ToolPlan, rng: random.Random) -> bool:
    """A value invented for a field the tool returned as null."""
    options = [st for st in plan.statements if st.null]
    if not options:
        return False
    st = rng.choice(options)
    assert st.spec is not None
    st.null = False
    st.value = st.spec.gen(rng)
    st.template = rng.choice(st.spec.says)
    return True


def t_status_flip(plan: ToolPlan, rng: random.Random) -> bool:
    """A status (or other enumerated state) replaced by another valid one."""
    options = [st for st in plan.statements if st.spec and st.spec.kind == "enum" and not st.null]
    if options:
        st = rng.choice(options)
        assert st.spec is not None
        avoid = [st.earlier_value] if st.earlier_value is not None else []
        new = changed_value(st.spec, st.value, rng, avoid)
        if new is None:
            return False
        st.value = new
        return True
    for st in plan.statements:
        summary = st.summary
        if summary and summary["type"] == "count":
            spec = summary["spec"]
            others = [v for v in spec.values if v != summary["value"]]
            summary["value"] = rng.choice(others)
            return True
    return False


def t_superseded(plan: ToolPlan, rng: random.Random) -> bool:
    """The earlier, replaced result used instead of the latest."""
    for st in plan.statements:
        if st.earlier_value is not None:
            st.value = st.earlier_value
            return True
    return False


def t_number_change(plan: ToolPlan, rng: random.Random) -> bool:
    """A number, amount, percentage, date or time changed."""
    options = [st for st in plan.statements if st.spec and st.spec.numeric and not st.null]
    if options:
        st = rng.choice(options)
        assert st.spec is not None
        avoid = list(st.other_record_values) + ([st.earlier_value] if st.earlier_value else [])
        new = changed_value(st.spec, st.value, rng, avoid)
        if new is None:
            return False
        st.value = new
        return True
    for st in plan.statements:
        summary = st.summary
        if summary and summary["type"] == "sum":
            amount = float(summary["sum"]["amount"])
            delta = rng.choice([-1, 1]) * round(rng.uniform(0.05, 0.3) * amount, 2)
            summary["sum"] = {
                "amount": round(amount + delta, 2),
                "currency": summary["sum"]["currency"],
            }
            return True
        if summary and summary["type"] == "count":
            # claim one more or one fewer matching record, naming them accordingly
            ids = list(summary["ids"])
            if summary["others"] and (len(ids) == 1 or rng.random() < 0.5):
                ids.append(rng.choice(summary["others"]))
            else:
                ids.pop(rng.randrange(len(ids)))
            summary["ids"] = ids
            return True
    return False


TOOL_PERTURBATIONS: dict[str, Callable[[ToolPlan, random.Random], bool]] = {
    "wrong_record": t_wrong_record,
    "null_filled": t_null_filled,
    "status_flip": t_status_flip,
    "superseded": t_superseded,
    "number_change": t_number_change,
}


NULL_FILL_SHARE = 0.4  # of the hallucinated plans that report a null


def tool_hallucinate(plan: ToolPlan, rng: random.Random, counts: Counter[str]) -> str | None:
    """Apply the least-used applicable kind; returns the kind or None.

    A plan with a null is filled (null_filled) only with probability NULL_FILL_SHARE, so that
    hallucinated answers still report nulls about as often as factual ones do (the plan
    weights give the hallucinated side correspondingly more null plans).
    """
    order = sorted(TOOL_PERTURBATIONS, key=lambda k: counts[k] + 2.0 * rng.random())
    if plan.base_kind == "latest_result" and rng.random() < 0.8:
        order.remove("superseded")
        order.insert(0, "superseded")
    has_null = any(st.null for st in plan.statements)
    fill = has_null and rng.random() < NULL_FILL_SHARE
    if fill:
        order = ["null_filled"]
    elif has_null:
        order = [k for k in order if k != "null_filled"]
    for kind in order:
        saved = copy.deepcopy(plan.statements)
        before = render_answer(plan)
        if TOOL_PERTURBATIONS[kind](plan, rng) and render_answer(plan) != before:
            counts[kind] += 1
            return kind
        plan.statements = saved
    return None


def tool_perturbable(plan: ToolPlan, rng: random.Random) -> bool:
    """Whether some hallucination kind applies (both labels pass this same filter)."""
    for perturb in TOOL_PERTURBATIONS.values():
        trial = copy.deepcopy(plan)
        if perturb(trial, rng) and render_answer(trial) != render_answer(plan):
            return True
    return False


# ---------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------


def allocate(n: int, kinds: Sequence[str], weights: Sequence[float]) -> list[str]:
    """``n`` kinds in proportion to ``weights`` (largest remainders), in a fixed order."""
    total = sum(weights)
    exact = [n * w / total for w in weights]
    counts = [int(x) for x in exact]
    for i in sorted(range(len(kinds)), key=lambda i: counts[i] - exact[i])[: n - sum(counts)]:
        counts[i] += 1
    return [k for k, c in zip(kinds, counts, strict=True) for _ in range(c)]


def build_tool_cases(n: int, rng: random.Random) -> list[dict[str, Any]]:
    """``n`` tool-output cases (an even number), half hallucinated, spread over the domains."""
    counts: Counter[str] = Counter()
    # The hallucinated side draws more null plans: NULL_FILL_SHARE of them lose their null
    # to null_filled, and the share of answers that report a null must stay the same. The
    # extra null plans (two or three statements) replace multi_field plans (the same size),
    # so that answers keep the same number of statements on both sides.
    factual_weights = list(FACTUAL_TOOL_WEIGHTS)
    null_i = FACTUAL_TOOL_KINDS.index("null_reported")
    multi_i = FACTUAL_TOOL_KINDS.index("multi_field")
    extra = factual_weights[null_i] / (1 - NULL_FILL_SHARE) - factual_weights[null_i]
    hallucinated_weights = list(factual_weights)
    hallucinated_weights[null_i] += extra
    hallucinated_weights[multi_i] -= extra
    slots = [(FACTUAL, b) for b in allocate(n // 2, FACTUAL_TOOL_KINDS, factual_weights)]
    slots += [(HALLUCINATED, b) for b in allocate(n // 2, FACTUAL_TOOL_KINDS, hallucinated_weights)]
    rng.shuffle(slots)
    cases: list[dict[str, Any]] = []
    for i, (label, base_kind) in enumerate(slots):
        domain = DOMAINS[i % len(DOMAINS)]
        while True:
            plan = make_tool_plan(domain, rng, base_kind)
            if plan is None or not tool_perturbable(plan, random.Random(rng.random())):
                continue
            kind = plan.base_kind
            if label == HALLUCINATED:
                found = tool_hallucinate(plan, rng, counts)
                if found is None:
                    continue
                kind = found
            cases.append(
                {
                    "input": plan.question,
                    "contexts": plan.contexts,
                    "output": render_answer(plan),
                    "label": label,
                    "kind": kind,
                    "domain": domain.name,
                    "evidence": "tool",
                    "base": plan.base_kind,
                }
            )
            break
    return cases
