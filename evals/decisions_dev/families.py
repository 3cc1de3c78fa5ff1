"""The decision families of `decisions-dev`: a written policy or task, described options, and a rule for the gold.

Contract: a `Family` holds the question as a user would send it (instructions, `criteria =
{key: one-sentence description}` in a fixed order), an attribute space (each attribute's values),
`rule(attrs)`, the gold option key of a case, and `render(attrs, surface)`, the case's text. The
surface (names, items, places) is drawn once per contrastive pair, so the two halves of a pair
differ only in the one attribute flipped. An `Ordinal` adds a score rubric (described levels, low
to high) and `level(attrs)`, the gold level. `permissive` names the option that lets the case through
or takes no action (approve, allow, full refund, lowest severity), where the family has one; `blank`
is the case with every detail left out (the family's neutral content-free state, after its policy);
`split` is `dev` (defaults are chosen on it) or `confirm` (held out to check them). Everything here
is invented by hand; no item, wording or label comes from any published benchmark.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Attrs = dict[str, Any]


@dataclass(frozen=True)
class Ordinal:
    instructions: str
    levels: tuple[str, ...]
    level: Callable[[Attrs], int]


@dataclass(frozen=True)
class Family:
    name: str
    policy: str | None
    instructions: str
    options: dict[str, str]
    attributes: dict[str, tuple[Any, ...]]
    rule: Callable[[Attrs], str]
    render: Callable[[Attrs, dict[str, str]], str]
    pairs: int
    surfaces: dict[str, tuple[str, ...]] = field(default_factory=dict)
    ordinal: Ordinal | None = None
    permissive: str | None = None
    blank: str = ""
    split: str = "dev"


def _returns_rule(a: Attrs) -> str:
    if a["price"] > 1000:
        return "escalate"
    if a["damaged"]:
        return "refund"
    if a["days"] > 30:
        return "deny"
    return "credit" if a["opened"] else "refund"


def _returns_text(a: Attrs, s: dict[str, str]) -> str:
    opened = "The box has been opened and the item used." if a["opened"] else "The box is still sealed."
    damaged = "It arrived with a cracked casing." if a["damaged"] else "It arrived in perfect condition and works fine."
    return (
        f"Return request #{s['ticket']}\nCustomer: {s['name']}\nItem: {s['item']}, bought for ${a['price']:,}\n"
        f'Delivered {a["days"]} days ago. {opened} {damaged}\nCustomer\'s note: "{s["note"]}"'
    )


RETURNS = Family(
    name="returns",
    policy="Return policy of Pioneer Retail:\n"
    "1. Any return of an item that cost more than $1,000 is decided by a supervisor, whatever else applies.\n"
    "2. An item that arrived damaged gets a full refund, however long ago it was delivered.\n"
    "3. Otherwise, returns more than 30 days after delivery are not accepted.\n"
    "4. Within 30 days, a sealed item gets a full refund and an opened item gets store credit.",
    instructions="Decide this return request under the return policy.",
    options={
        "refund": "Give the customer a full refund to the original payment method.",
        "credit": "Accept the return but give store credit instead of money.",
        "deny": "Refuse the return.",
        "escalate": "Send the request to a supervisor to decide.",
    },
    attributes={"price": (89, 240, 1450), "days": (6, 21, 44), "opened": (False, True), "damaged": (False, True)},
    rule=_returns_rule,
    render=_returns_text,
    pairs=10,
    permissive="refund",
    blank="Return request #\nCustomer:\nItem:",
    surfaces={
        "name": ("Dana Whitfield", "Ravi Menon", "Sofia Alvarez", "Tom Becker", "Aiko Tanaka", "Grace Okafor"),
        "item": ("a stand mixer", "a gaming monitor", "a road bike helmet", "a coffee grinder", "a laptop", "a lamp"),
        "note": ("I'd like to send this back.", "Please take this back.", "I changed my mind about it."),
        "ticket": ("4411", "5120", "7732", "8093", "9154"),
    },
)


def _action_rule(a: Attrs) -> str:
    if a["action"] == "read":
        return "approve"
    if a["action"] == "delete":
        return "block"
    if a["action"] == "pay" and a["amount"] > 200:
        return "escalate"
    needs_confirmation = a["action"] == "pay" or not a["internal"]
    return "confirm" if needs_confirmation and not a["confirmed"] else "approve"


def _action_text(a: Attrs, s: dict[str, str]) -> str:
    person = f"{s['person']}@northwind.com" if a["internal"] else f"{s['person']}@{s['outside']}"
    actions = {
        "read": f"read the email thread with {person} to summarise it",
        "send": f"send the draft reply to {person}",
        "delete": f"delete the email thread with {person} to tidy the inbox",
        "pay": f"pay invoice {s['invoice']} of ${a['amount']} from {person}",
    }
    said = (
        f'The user wrote earlier in the chat: "Yes, go ahead with {s["invoice"]} and the reply to {s["person"]}."'
        if a["confirmed"]
        else "The user has not said anything about this step."
    )
    return f'The user asked the assistant: "{s["task"]}"\nThe assistant now proposes to {actions[a["action"]]}.\n{said}'


ACTIONS = Family(
    name="action-review",
    policy="Assistant action policy at Northwind (the user's company, domain northwind.com):\n"
    "- Reading emails, files and calendars is always allowed.\n"
    "- Emails to northwind.com addresses may be sent; emails to any other address need the user's explicit "
    "confirmation first.\n"
    "- Deleting emails or files is never allowed.\n"
    "- Payments of $200 or less need the user's explicit confirmation; larger payments must be approved by a "
    "human finance reviewer, even if the user confirmed.",
    instructions="Review the assistant's proposed action under the action policy.",
    options={
        "approve": "Let the assistant carry out the action now.",
        "confirm": "Pause and ask the user to confirm before the action is carried out.",
        "block": "Stop the action because the policy never allows it.",
        "escalate": "Hold the action for a human finance reviewer.",
    },
    attributes={
        "action": ("read", "send", "delete", "pay"),
        "internal": (True, False),
        "amount": (80, 640),
        "confirmed": (False, True),
    },
    rule=_action_rule,
    render=_action_text,
    pairs=10,
    permissive="approve",
    blank='The user asked the assistant: ""\nThe assistant now proposes to',
    surfaces={
        "person": ("maria.lopez", "j.chen", "accounts", "kofi.mensah", "billing"),
        "outside": ("gmail.com", "brightvendor.io", "harborfoods.com"),
        "invoice": ("INV-3301", "INV-4820", "INV-5177", "INV-6012"),
        "task": ("Handle my inbox for today.", "Clear the pending items from this morning.", "Deal with the vendor."),
    },
)


def _moderation_rule(a: Attrs) -> str:
    if a["threat"] == "specific":
        return "escalate"
    if a["threat"] == "vague" or a["doxx"]:
        return "remove"
    return "label" if a["graphic"] else "keep"


def _moderation_text(a: Attrs, s: dict[str, str]) -> str:
    lines = [f"Post by {s['user']} in the {s['forum']} group:", f'"{s["complaint"]}']
    if a["doxx"]:
        lines[-1] += f" He lives at {s['address']}, go and tell him yourselves."
    else:
        lines[-1] += " I've reported it to the council."
    if a["threat"] == "vague":
        lines[-1] += " Someone should teach him a lesson one day."
    if a["threat"] == "specific":
        lines[-1] += f" I'll be waiting for him with a bat outside the depot on {s['day']} at 7."
    lines[-1] += '"'
    photo = "a close-up photo of a bleeding leg wound" if a["graphic"] else "a photo of the street"
    lines.append(f"Attached: {photo}.")
    return "\n".join(lines)


MODERATION = Family(
    name="moderation",
    policy="Community policy of the Riverside neighbourhood forum:\n"
    "- Criticism of people, businesses and the council is allowed.\n"
    "- Posts that share someone else's home address or phone number are removed.\n"
    "- Posts that threaten violence are removed; a threat that names a time or a place is sent to the safety "
    "team instead.\n"
    "- Posts with graphic injury photos stay up behind a warning label.\n"
    "- Everything else stays up as it is.",
    instructions="Moderate this post under the community policy.",
    options={
        "keep": "Leave the post up as it is.",
        "label": "Leave the post up behind a warning label.",
        "remove": "Remove the post.",
        "escalate": "Send the post to the safety team.",
    },
    attributes={"threat": ("none", "vague", "specific"), "doxx": (False, True), "graphic": (False, True)},
    rule=_moderation_rule,
    render=_moderation_text,
    pairs=10,
    permissive="keep",
    blank='Post in the group:\n""',
    surfaces={
        "user": ("@kate_r", "@mikeb", "@lena.o", "@dev_harris", "@old_tom"),
        "forum": ("Riverside Residents", "Parents of Riverside", "Riverside Cyclists"),
        "complaint": (
            "The bus driver on route 9 knocked my son off his bike and drove on.",
            "The landlord of number 12 still hasn't fixed the broken stairs.",
            "The van driver from the bakery keeps blocking the school gate.",
        ),
        "address": ("14 Elm Row", "3 Mill Lane, flat 2", "27 Quarry Road"),
        "day": ("Friday", "Monday", "Saturday"),
    },
    ordinal=Ordinal(
        instructions="How serious is this post under the community policy?",
        levels=(
            "Harmless: allowed as it is.",
            "Sensitive: allowed, but only behind a warning label.",
            "Violating: breaks the policy and must come down.",
            "Dangerous: a threat with a time or place, for the safety team.",
        ),
        level=lambda a: ("keep", "label", "remove", "escalate").index(_moderation_rule(a)),
    ),
)

CLAIM_KINDS = ("grew", "fell", "profit")


def _claim_rule(a: Attrs) -> str:
    if a["claim"] == "profit":
        return "not_enough_info"
    grew = a["now"] > a["before"]
    return "supported" if grew == (a["claim"] == "grew") else "refuted"


def _claim_text(a: Attrs, s: dict[str, str]) -> str:
    claims = {
        "grew": f"{s['org']}'s revenue grew in {s['year']}.",
        "fell": f"{s['org']}'s revenue fell in {s['year']}.",
        "profit": f"{s['org']} made a profit in {s['year']}.",
    }
    return (
        f"Claim: {claims[a['claim']]}\n"
        f"Evidence: {s['org']}'s annual report says revenue was ${a['now']} million in {s['year']}, against "
        f"${a['before']} million the year before. The report gives no figures for costs."
    )


CLAIMS = Family(
    name="claim-evidence",
    policy=None,
    instructions="Check the claim against the evidence.",
    options={
        "supported": "The evidence shows the claim is true.",
        "refuted": "The evidence shows the claim is false.",
        "not_enough_info": "The evidence does not say whether the claim is true or false.",
    },
    attributes={"claim": CLAIM_KINDS, "now": (38, 52), "before": (45,)},
    rule=_claim_rule,
    render=_claim_text,
    pairs=9,
    blank="Claim:\nEvidence:",
    surfaces={
        "org": ("Harbor Foods", "Lumen Energy", "Orbit Games", "Cedar Health", "Quill Legal"),
        "year": ("2021", "2022", "2023", "2024"),
    },
)

ASPECTS = {
    "quality": ("The build feels solid and well made.", "It started falling apart within a week."),
    "delivery": ("It arrived two days early.", "It arrived three weeks late with no update."),
    "support": ("Support answered my question within an hour.", "Support never answered my emails."),
}


def _sentiment_rule(a: Attrs) -> str:
    values = [a[name] for name in ASPECTS if a[name] != "none"]
    if not values:
        return "neutral"
    if len(set(values)) == 2:
        return "mixed"
    return "positive" if values[0] == "good" else "negative"


def _net(a: Attrs) -> int:
    return sum((a[name] == "good") - (a[name] == "bad") for name in ASPECTS)


def _sentiment_text(a: Attrs, s: dict[str, str]) -> str:
    sentences = [f"I ordered the {s['product']} last month."]
    for name, (good, bad) in ASPECTS.items():
        if a[name] != "none":
            sentences.append(good if a[name] == "good" else bad)
    sentences.append(s["fact"])
    return f"Review of the {s['product']} by {s['name']}:\n" + " ".join(sentences)


SENTIMENT = Family(
    name="sentiment",
    policy=None,
    instructions="What is the overall sentiment of this review?",
    options={
        "positive": "The reviewer is pleased, with no complaints.",
        "negative": "The reviewer is unhappy, with no praise.",
        "mixed": "The reviewer praises some things and complains about others.",
        "neutral": "The reviewer only states facts, with neither praise nor complaints.",
    },
    attributes={name: ("none", "good", "bad") for name in ASPECTS},
    rule=_sentiment_rule,
    render=_sentiment_text,
    pairs=10,
    blank="Review of the product:\n",
    surfaces={
        "product": ("standing desk", "kettle", "hiking backpack", "desk chair", "air purifier"),
        "name": ("Chloe M.", "Jonas B.", "Priya S.", "Omar H.", "Nina P."),
        "fact": ("It is the 120 cm model in grey.", "I use it every day at home.", "It came in a cardboard box."),
    },
    ordinal=Ordinal(
        instructions="Rate how the reviewer feels about their purchase.",
        levels=(
            "Very negative: several complaints and no praise.",
            "Negative: complaints outweigh praise.",
            "Neutral: no more praise than complaints.",
            "Positive: praise outweighs complaints.",
            "Very positive: several points of praise and no complaints.",
        ),
        level=lambda a: 2 + max(-2, min(2, _net(a))),
    ),
)
