"""Question templates of the `jev-dev` generator (evals/jev_dev/gen.py): the service domains.

Support, returns and incidents are here; grading, contracts and hiring in evals/jev_dev/domains.py.

Each domain has an intro (the state's first line, `{name}`, `{ref}` and `{org}` filled in), yes/no
facts, count facts, categorical facts and rubrics. Every template says how a fact is written as a
sentence and how the gold answer follows from the fact:

- `Flag(question, yes, negated)`: gold yes when `yes` is in the state; no when `negated` is, or when
  neither is (the question always asks whether the state says so, so a fact not stated is a no).
- `Count(question, sentence, low, high)`: the state says n (`{n}`); the question asks whether n is
  more than `{t}`; gold yes exactly when n > t.
- `Pick(instructions, options)`: options are (key, description, sentence); the state holds the gold
  option's sentence; an option whose sentence is None is "not stated" and is gold when no other
  option's sentence is in the state.
- `Rubric(instructions, sentence, levels)`: levels low to high as (description, low, high); the
  state says n (`{n}`); gold is the one level whose [low, high] holds n.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Flag:
    question: str
    yes: str
    negated: str


@dataclass(frozen=True)
class Count:
    question: str
    sentence: str
    low: int
    high: int


@dataclass(frozen=True)
class Pick:
    instructions: str
    options: tuple[tuple[str, str, str | None], ...]


@dataclass(frozen=True)
class Rubric:
    instructions: str
    sentence: str
    levels: tuple[tuple[str, int, int], ...]


@dataclass(frozen=True)
class Domain:
    name: str
    intro: str
    flags: tuple[Flag, ...]
    counts: tuple[Count, ...]
    picks: tuple[Pick, ...]
    rubrics: tuple[Rubric, ...]


SUPPORT = Domain(
    "support",
    "Support ticket {ref} from {name} at {org}:",
    (
        Flag(
            "Does the customer say they already restarted the device?",
            "I already restarted the router twice this morning.",
            "I have not restarted anything yet because I did not want to lose my settings.",
        ),
        Flag(
            "Does the customer ask for a refund?",
            "If this cannot be fixed this week I would like my money back.",
            "I am not asking for a refund, I just want it to work.",
        ),
        Flag(
            "Does the customer mention that the problem started after an update?",
            "It all started right after the latest firmware update.",
            "We did not install any update recently, so that is not it.",
        ),
    ),
    (
        Count(
            "Are more than {t} people affected by the problem?", "Right now {n} people on my team cannot work.", 1, 40
        ),
        Count(
            "Has the customer contacted support more than {t} times about this?",
            "This is contact number {n} about the same issue.",
            1,
            9,
        ),
    ),
    (
        Pick(
            "Which product is this ticket about?",
            (
                ("router", "The Wi-Fi router", "The router keeps dropping the connection every few minutes."),
                ("app", "The mobile app", "The mobile app crashes as soon as I open the dashboard."),
                ("portal", "The billing portal", "The billing portal shows an error when I try to download invoices."),
                ("printer", "The network printer", "The network printer stopped accepting jobs from any laptop."),
                ("unknown", "The ticket does not say which product", None),
            ),
        ),
        Pick(
            "Which team should handle this ticket?",
            (
                ("billing", "Billing: charges, invoices and refunds", "I was charged twice for the same month."),
                (
                    "tech",
                    "Technical support: outages and errors",
                    "Since yesterday nothing connects and the status light is red.",
                ),
                (
                    "accounts",
                    "Accounts: logins, passwords and access",
                    "I am locked out of my account after the password reset.",
                ),
                ("sales", "Sales: new plans and upgrades", "We want to move our whole office to the business plan."),
            ),
        ),
    ),
    (
        Rubric(
            "How urgent is this ticket? Base it on how long the customer has been unable to work.",
            "We have been unable to work for {n} hours now.",
            (
                ("Low: the outage has lasted under 2 hours", 0, 1),
                ("Medium: the outage has lasted 2 to 8 hours", 2, 8),
                ("High: the outage has lasted 9 to 24 hours", 9, 24),
                ("Critical: the outage has lasted more than a day", 25, 96),
            ),
        ),
        Rubric(
            "Rate how many devices the issue reaches.",
            "The issue shows up on {n} of our devices.",
            (
                ("Isolated: 1 device", 1, 1),
                ("Small: 2 to 5 devices", 2, 5),
                ("Wide: 6 to 20 devices", 6, 20),
                ("Massive: more than 20 devices", 21, 200),
            ),
        ),
    ),
)

RETURNS = Domain(
    "returns",
    "Return request {ref}, customer {name} ({org} order):",
    (
        Flag(
            "Does the customer say the item arrived damaged?",
            "The box was crushed and the item inside is cracked.",
            "The item arrived in perfect condition, it is just not what I expected.",
        ),
        Flag(
            "Does the customer still have the original packaging?",
            "I kept the original box and all the packaging.",
            "I threw the original packaging away, sorry.",
        ),
        Flag(
            "Does the customer ask for an exchange instead of a refund?",
            "I would prefer to swap it for another size rather than get a refund.",
            "I do not want an exchange, only a refund please.",
        ),
    ),
    (
        Count("Is the order worth more than ${t}?", "The order came to ${n} in total.", 10, 900),
        Count("Were more than {t} items in the order?", "There were {n} items in the order.", 1, 12),
    ),
    (
        Pick(
            "What kind of product is being returned?",
            (
                ("shoes", "Footwear", "The running shoes are half a size too small."),
                ("jacket", "Clothing", "The winter jacket has a broken zip."),
                ("lamp", "Home goods", "The desk lamp flickers when it is switched on."),
                ("phone", "Electronics", "The phone case does not fit my phone model."),
                ("none", "The request does not say", None),
            ),
        ),
        Pick(
            "How did the customer pay?",
            (
                ("card", "Credit or debit card", "I paid with my credit card."),
                ("paypal", "PayPal", "I paid through PayPal."),
                ("gift", "Gift card", "I used a gift card for the whole amount."),
                ("none", "The payment method is not stated", None),
            ),
        ),
    ),
    (
        Rubric(
            "Our policy allows returns within 30 days. Rate how late this return is.",
            "I received the order {n} days ago.",
            (
                ("Well within the window: 10 days or fewer", 0, 10),
                ("Within the window: 11 to 30 days", 11, 30),
                ("Late: 31 to 60 days", 31, 60),
            ),
        ),
        Rubric(
            "Rate the value of the returned item for fraud review.",
            "The item I am returning cost ${n}.",
            (
                ("Trivial: under $20", 1, 19),
                ("Small: $20 to $49", 20, 49),
                ("Moderate: $50 to $149", 50, 149),
                ("Large: $150 to $499", 150, 499),
                ("Very large: $500 or more", 500, 2000),
            ),
        ),
    ),
)

INCIDENTS = Domain(
    "incidents",
    "Incident report {ref}, filed by {name} ({org} on-call):",
    (
        Flag(
            "Does the report say customer data was exposed?",
            "Some customer records were readable without authentication during the incident.",
            "No customer data was exposed at any point.",
        ),
        Flag(
            "Does the report say the service is fully restored?",
            "The service is fully restored and error rates are back to normal.",
            "The service is not restored yet; we are still failing over.",
        ),
        Flag(
            "Does the report say a rollback was performed?",
            "We rolled back the deployment at the start of the incident.",
            "We did not roll back, because the previous version has the same bug.",
        ),
    ),
    (
        Count(
            "Did the incident last more than {t} minutes?",
            "The incident lasted {n} minutes from first alert to recovery.",
            2,
            300,
        ),
        Count("Did more than {t} alerts fire?", "In total {n} alerts fired during the incident.", 1, 60),
    ),
    (
        Pick(
            "What was the root cause?",
            (
                (
                    "config",
                    "A configuration change",
                    "The root cause was a bad configuration change to the load balancer.",
                ),
                ("capacity", "Running out of capacity", "The root cause was the database running out of disk space."),
                ("vendor", "A third-party outage", "The root cause was an outage at our payment provider."),
                ("code", "A software bug", "The root cause was a bug in the new checkout code."),
                ("unknown", "The root cause is not stated", None),
            ),
        ),
        Pick(
            "Which region was affected?",
            (
                ("eu", "Europe", "Only the Frankfurt region was affected."),
                ("us", "North America", "Only the Virginia region was affected."),
                ("asia", "Asia", "Only the Singapore region was affected."),
            ),
        ),
    ),
    (
        Rubric(
            "Assign a severity based on the share of requests that failed.",
            "At the peak, {n}% of requests failed.",
            (
                ("SEV5: under 1% of requests failed", 0, 0),
                ("SEV4: 1 to 4% failed", 1, 4),
                ("SEV3: 5 to 14% failed", 5, 14),
                ("SEV2: 15 to 29% failed", 15, 29),
                ("SEV1: 30% or more failed", 30, 100),
            ),
        ),
        Rubric(
            "Rate the customer impact by the number of customers who reported problems.",
            "{n} customers reported problems to support.",
            (
                ("None: no customer reported a problem", 0, 0),
                ("Very low: 1 to 2 customers", 1, 2),
                ("Low: 3 to 9 customers", 3, 9),
                ("Moderate: 10 to 49 customers", 10, 49),
                ("High: 50 to 199 customers", 50, 199),
                ("Very high: 200 to 999 customers", 200, 999),
                ("Extreme: 1000 or more customers", 1000, 5000),
            ),
        ),
    ),
)
