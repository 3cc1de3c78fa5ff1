"""The held-out families of `decisions-dev` (`split = confirm`): insurance claims, mail filtering,
issue triage and delivery compensation.

Same contract as `families.py`. Nothing is chosen on these: a default picked on the dev split is
checked here, on policies and wordings it was not picked on. Each has a permissive or no-action
option. Invented by hand.
"""

from __future__ import annotations

from evals.decisions_dev.families import Attrs, Family, Ordinal


def _claim_rule(a: Attrs) -> str:
    if a["days"] > 60:
        return "reject"
    if a["amount"] > 10000:
        return "adjuster"
    return {"burst": "pay", "storm": "half", "leak": "reject"}[a["cause"]]


def _claim_text(a: Attrs, s: dict[str, str]) -> str:
    causes = {
        "burst": "A pipe under the kitchen sink burst overnight and flooded the floor.",
        "storm": "A storm tore tiles off the roof and rain came into the attic.",
        "leak": "A slow drip behind the bathroom wall soaked the plaster over several months.",
    }
    return (
        f"Claim {s['ref']}, policy holder {s['name']}, {s['town']}\n{causes[a['cause']]}\n"
        f"Repair estimate: ${a['amount']:,}\nFiled {a['days']} days after the damage."
    )


INSURANCE = Family(
    name="home-insurance",
    policy="Home cover HX-2, how claims are settled:\n"
    "1. Claims filed more than 60 days after the damage are rejected.\n"
    "2. Otherwise any claim over $10,000 is first inspected by an adjuster.\n"
    "3. Water from a burst pipe is paid in full.\n"
    "4. Storm damage is paid at half the repair cost.\n"
    "5. Damage from a slow leak or wear is not covered.",
    instructions="Settle this claim under the home cover.",
    options={
        "pay": "Pay the full repair cost.",
        "half": "Pay half of the repair cost.",
        "reject": "Reject the claim.",
        "adjuster": "Send an adjuster to inspect before deciding.",
    },
    attributes={"cause": ("burst", "storm", "leak"), "amount": (2400, 18500), "days": (9, 75)},
    rule=_claim_rule,
    render=_claim_text,
    pairs=12,
    permissive="pay",
    split="confirm",
    blank="Claim\nRepair estimate:",
    surfaces={
        "ref": ("HC-30417", "HC-30552", "HC-30689"),
        "name": ("Ruth Abara", "Leo Marchetti", "Sunita Patel", "Owen Price"),
        "town": ("Whitby", "Kendal", "Hexham"),
    },
)


def _mail_rule(a: Attrs) -> str:
    if a["attachment"] and not a["internal"]:
        return "quarantine"
    if a["asks_password"] and not a["internal"]:
        return "spam"
    return "promotions" if a["newsletter"] else "inbox"


def _mail_text(a: Attrs, s: dict[str, str]) -> str:
    sender = f"{s['sender']}@ferncroft.com (a colleague)" if a["internal"] else f"{s['sender']}@{s['outside']}"
    body = (
        "Body: asks the reader to confirm their password at a link." if a["asks_password"]
        else "Body: asks whether Thursday still works for the review.")  # fmt: skip
    attachment = "Attachment: invoice.exe" if a["attachment"] else "Attachment: agenda.pdf"
    kind = "Sent to a mailing list the user signed up to." if a["newsletter"] else "Sent to the user directly."
    return f"From: {sender}\nSubject: {s['subject']}\n{body}\n{attachment}\n{kind}"


MAIL = Family(
    name="mail-filter",
    policy="Mail rules at Ferncroft (company domain ferncroft.com):\n"
    "- Mail from outside the company with a program attached (.exe, .js, macros) is quarantined.\n"
    "- Mail from outside the company that asks for a password is spam.\n"
    "- Newsletters and mailing lists the user signed up to go to Promotions.\n"
    "- Everything else goes to the inbox.",
    instructions="Where does this email go under the mail rules?",
    options={
        "inbox": "Deliver it to the inbox.",
        "promotions": "Deliver it to the Promotions folder.",
        "spam": "Put it in the spam folder.",
        "quarantine": "Hold it in quarantine; the user never sees it.",
    },
    attributes={
        "internal": (True, False),
        "asks_password": (False, True),
        "attachment": (False, True),
        "newsletter": (False, True),
    },
    rule=_mail_rule,
    render=_mail_text,
    pairs=12,
    permissive="inbox",
    split="confirm",
    blank="From:\nSubject:",
    surfaces={
        "sender": ("p.nguyen", "team-updates", "r.fischer"),
        "outside": ("quickmail.net", "orbit-supply.com"),
        "subject": ("Quarterly review", "Your account", "Updates for this week"),
    },
)


def _issue_rule(a: Attrs) -> str:
    if a["documented"]:
        return "not_a_bug"
    if a["duplicate"]:
        return "duplicate"
    return "bug" if a["steps"] else "needs_info"


def _issue_text(a: Attrs, s: dict[str, str]) -> str:
    docs = f"The help page says: {s['behaviour']} on purpose." if a["documented"] else (
        "The help page says nothing about this.")  # fmt: skip
    steps = f"Steps: {s['steps']}" if a["steps"] else "Steps: none given; the reporter only says it happened."
    duplicate = f"Issue #{s['older']} (still open) reports the same problem." if a["duplicate"] else (
        "No open issue reports this.")  # fmt: skip
    return f'Issue #{s["number"]} against the Tally spreadsheet app: "{s["behaviour"]}."\n{docs}\n{steps}\n{duplicate}'


ISSUES = Family(
    name="issue-triage",
    policy="Triage rules for issues filed against the Tally spreadsheet app, first rule that fits:\n"
    "1. If the help page documents the behaviour, close the issue: it works as intended.\n"
    "2. If an open issue already reports the same problem, mark it as a duplicate.\n"
    "3. If the report gives no steps to reproduce, ask the reporter for them.\n"
    "4. Otherwise confirm it as a bug.",
    instructions="Triage this issue under the triage rules.",
    options={
        "bug": "Confirm it as a bug to fix.",
        "not_a_bug": "Close it: the app works as intended.",
        "needs_info": "Ask the reporter for steps to reproduce.",
        "duplicate": "Close it as a duplicate of the open issue.",
    },
    attributes={"documented": (False, True), "duplicate": (False, True), "steps": (True, False)},
    rule=_issue_rule,
    render=_issue_text,
    pairs=12,
    permissive="not_a_bug",
    split="confirm",
    blank="Issue against the Tally spreadsheet app:\nSteps:",
    surfaces={
        "number": ("2204", "2231", "2267", "2290"),
        "older": ("1987", "2010", "2145"),
        "behaviour": (
            "Sorting a column puts empty cells first",
            "Dates pasted from email turn into numbers",
            "Hidden rows are printed",
        ),
        "steps": ("open a sheet, sort column B, look at row 1.", "make a new sheet and do it once."),
    },
)

COMPENSATION = ("none", "voucher", "partial", "full_refund")


def _delivery_rule(a: Attrs) -> str:
    if a["missed"]:
        return "none"
    if a["late"] > 7:
        return "full_refund"
    if a["late"] >= 2:
        return "partial"
    return "voucher" if a["express"] else "none"


def _delivery_text(a: Attrs, s: dict[str, str]) -> str:
    shipping = "Shipping: express, paid for at checkout." if a["express"] else "Shipping: standard, free."
    missed = "The first delivery attempt failed: nobody was home." if a["missed"] else (
        "The courier's first delivery attempt was on the arrival day.")  # fmt: skip
    day = "day" if a["late"] == 1 else "days"
    return (
        f"Order {s['order']}: {s['item']} for {s['name']}\n{shipping}\n"
        f"Arrived {a['late']} {day} after the promised date.\n{missed}"
    )


DELIVERY = Family(
    name="delivery-guarantee",
    policy="Swiftcart delivery guarantee:\n"
    "- Nothing is owed when the delay came from a failed first delivery because nobody was home.\n"
    "- An order more than 7 days late is refunded in full.\n"
    "- An order 2 to 7 days late gets 20% of its price back.\n"
    "- An order less than 2 days late gets a $5 voucher if express shipping was paid for, and nothing otherwise.",
    instructions="What does the customer get under the delivery guarantee?",
    options={
        "full_refund": "Refund the full price of the order.",
        "partial": "Refund 20% of the price.",
        "voucher": "Give a $5 voucher.",
        "none": "Nothing is owed.",
    },
    attributes={"late": (1, 4, 10), "express": (False, True), "missed": (False, True)},
    rule=_delivery_rule,
    render=_delivery_text,
    pairs=12,
    permissive="full_refund",
    split="confirm",
    blank="Order\nShipping:",
    surfaces={
        "order": ("SC-771204", "SC-771398", "SC-772051"),
        "item": ("a rice cooker", "two pairs of boots", "a printer"),
        "name": ("Ines Duarte", "George Lam", "Wiebke Sand"),
    },
    ordinal=Ordinal(
        instructions="How much is the customer owed under the delivery guarantee?",
        levels=(
            "Nothing.",
            "A small voucher.",
            "Part of the price back.",
            "The full price back.",
        ),
        level=lambda a: COMPENSATION.index(_delivery_rule(a)),
    ),
)
