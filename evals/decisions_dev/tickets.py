"""The request-handling families of `decisions-dev`: routing to a tool, customer intent, bug triage.

Same contract as `families.py`: a fixed question, an attribute space, a rule for the gold, a text
per case; the surface is shared by both halves of a pair. Invented by hand.
"""

from __future__ import annotations

from evals.decisions_dev.families import Attrs, Family, Ordinal

TOOL_TEXTS = {
    "weather": "Will it be warm enough to eat outside in {city} on {day}?",
    "calendar": "Put dinner with {person} in {city} on {day} into my calendar.",
    "email": "Write to {person} that dinner in {city} on {day} is off.",
    "calculator": "Dinner in {city} on {day} cost $184 for 4 people; what is each person's share?",
    "web_search": "Find a restaurant in {city} that is open on {day} evening.",
}


def _routing_text(a: Attrs, s: dict[str, str]) -> str:
    return f'User message: "{TOOL_TEXTS[a["tool"]].format(**s)}"'


ROUTING = Family(
    name="tool-routing",
    policy="You are the router of a personal assistant. Each user message goes to exactly one tool.",
    instructions="Which tool should handle the user's message?",
    options={
        "weather": "Looks up the weather forecast for a place and day.",
        "calendar": "Creates, moves or lists events in the user's calendar.",
        "email": "Writes and sends an email for the user.",
        "calculator": "Does arithmetic on numbers the user gives.",
        "web_search": "Searches the web for places, facts and opening hours.",
    },
    attributes={"tool": tuple(TOOL_TEXTS)},
    rule=lambda a: a["tool"],
    render=_routing_text,
    pairs=10,
    blank='User message: ""',
    surfaces={
        "city": ("Lisbon", "Denver", "Osaka", "Leeds", "Porto"),
        "day": ("Friday", "Saturday", "Tuesday", "Sunday"),
        "person": ("Sam", "Ines", "Mark", "Yuki"),
    },
)

INTENT_TEXTS = {
    "billing": "I was charged twice for order {order} this month.",
    "cancel": "please cancel my {plan} subscription before the next renewal.",
    "technical": "The {plan} app crashes every time I open order {order}.",
    "shipping": "Order {order} still hasn't arrived and tracking hasn't moved for a week.",
    "account_access": "I can't log in to see order {order}: the reset email never comes.",
    "feedback": "just wanted to say the {plan} plan has been great, especially order {order}.",
}


def _intent_text(a: Attrs, s: dict[str, str]) -> str:
    return f'Message from {s["name"]} (customer since {s["year"]}):\n"Hello, {INTENT_TEXTS[a["intent"]].format(**s)}"'


INTENT = Family(
    name="intent",
    policy=None,
    instructions="What does the customer want? Pick the queue for this message.",
    options={
        "billing": "Questions or problems about charges, invoices and refunds of payments.",
        "cancel": "The customer wants to end their subscription.",
        "technical": "Something in the app or website does not work.",
        "shipping": "Where a delivery is, or a problem with it.",
        "account_access": "The customer cannot sign in to their account.",
        "feedback": "Praise or suggestions, with nothing to fix.",
    },
    attributes={"intent": tuple(INTENT_TEXTS)},
    rule=lambda a: a["intent"],
    render=_intent_text,
    pairs=12,
    blank='Message from a customer:\n""',
    surfaces={
        "name": ("Luca Romano", "Aiko Tanaka", "Grace Okafor", "Ravi Menon"),
        "year": ("2019", "2021", "2023"),
        "order": ("#58213", "#60077", "#61940", "#63312"),
        "plan": ("Family", "Pro", "Basic"),
    },
)

EFFECTS = {
    "data_loss": "Saving a document deletes the previous version instead of keeping it.",
    "broken": "The export button does nothing: no file is produced.",
    "cosmetic": "The export button's label is misaligned by a few pixels.",
}


def _triage_rule(a: Attrs) -> str:
    if a["effect"] == "cosmetic":
        return "p3"
    if a["workaround"]:
        return "p2"
    return "p0" if a["scope"] == "all" else "p1"


def _triage_text(a: Attrs, s: dict[str, str]) -> str:
    scope = "It happens to every customer we checked." if a["scope"] == "all" else "Only one customer has seen it."
    workaround = f"Workaround: {s['workaround']}" if a["workaround"] else "Workaround: none found so far."
    return f"Bug report {s['id']} ({s['platform']}):\n{EFFECTS[a['effect']]} {scope}\n{workaround}"


TRIAGE = Family(
    name="triage",
    policy=None,
    instructions="Triage this bug report.",
    options={
        "p0": "Critical: everyone is blocked or losing work with no way around it; fix now.",
        "p1": "High: some users are blocked or losing work with no way around it; fix this week.",
        "p2": "Medium: a real problem, but users have a way around it; plan a fix.",
        "p3": "Low: cosmetic only, nothing stops anyone; fix when convenient.",
    },
    attributes={"effect": tuple(EFFECTS), "scope": ("all", "one"), "workaround": (False, True)},
    rule=_triage_rule,
    render=_triage_text,
    pairs=10,
    permissive="p3",
    blank="Bug report:\nWorkaround:",
    surfaces={
        "id": ("BUG-1182", "BUG-1240", "BUG-1307", "BUG-1391"),
        "platform": ("web app", "desktop app", "iPad app"),
        "workaround": ("users can copy the file by hand first.", "the old menu entry still works."),
    },
    ordinal=Ordinal(
        instructions="How severe is this bug?",
        levels=(
            "Cosmetic: looks wrong, but nothing stops anyone.",
            "Moderate: a real problem that users can get around.",
            "Serious: some users are blocked or lose work, with no way around it.",
            "Critical: every user is blocked or loses work, with no way around it.",
        ),
        level=lambda a: ("p3", "p2", "p1", "p0").index(_triage_rule(a)),
    ),
)
