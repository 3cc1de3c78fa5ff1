"""The workplace-policy families of `decisions-dev` (dev split): expenses, access, merges, leave,
marketplace enforcement and alerts.

Same contract as `families.py`: a written policy, described options, an attribute space, a rule for
the gold and a text per case whose details each sit on their own line, so that the two halves of a
pair differ in one line. Each has a permissive or no-action option. Invented by hand.
"""

from __future__ import annotations

from evals.decisions_dev.families import Attrs, Family, Ordinal


def _expense_rule(a: Attrs) -> str:
    if a["category"] == "wine":
        return "reject"
    if a["amount"] > 500 and not a["preapproved"]:
        return "manager"
    return "receipt" if a["amount"] > 75 and not a["receipt"] else "approve"


def _expense_text(a: Attrs, s: dict[str, str]) -> str:
    what = {"meals": "Team dinner with a client", "taxi": "Taxi to the airport", "wine": "Two bottles of wine"}
    receipt = "Receipt: attached." if a["receipt"] else "Receipt: none attached."
    pre = f"Pre-approved in writing by {s['boss']}." if a["preapproved"] else "No pre-approval on file."
    return (
        f"Expense claim {s['ref']} from {s['name']}\n{what[a['category']]} on the {s['trip']} trip\n"
        f"Amount: ${a['amount']}\n{receipt}\n{pre}"
    )


EXPENSES = Family(
    name="expenses",
    policy="Expense policy of Halden & Co:\n"
    "1. Alcohol is never reimbursed.\n"
    "2. A claim over $500 needs the manager's approval, unless it was pre-approved in writing.\n"
    "3. A claim over $75 needs a receipt; when none is attached, ask for it.\n"
    "4. Every other claim is paid.",
    instructions="Decide this expense claim under the expense policy.",
    options={
        "approve": "Pay the claim now.",
        "receipt": "Ask the employee for the missing receipt before paying.",
        "reject": "Refuse the claim.",
        "manager": "Send the claim to the employee's manager to approve.",
    },
    attributes={
        "category": ("meals", "taxi", "wine"),
        "amount": (42, 160, 730),
        "receipt": (True, False),
        "preapproved": (False, True),
    },
    rule=_expense_rule,
    render=_expense_text,
    pairs=12,
    permissive="approve",
    blank="Expense claim\nAmount:",
    surfaces={
        "name": ("Mira Holt", "Deepak Rao", "Lucy Brennan", "Felix Wagner"),
        "ref": ("EX-2231", "EX-2307", "EX-2415", "EX-2580"),
        "trip": ("Madrid", "Glasgow", "Toronto"),
        "boss": ("Anna Keller", "Sam Ortiz"),
    },
)


def _access_rule(a: Attrs) -> str:
    if a["system"] == "wiki":
        return "grant"
    if a["contractor"]:
        return "deny"
    if a["system"] == "finance":
        return "grant" if a["team"] == "finance" else "manager"
    return "manager" if a["team"] == "engineering" and a["oncall"] else "deny"


def _access_text(a: Attrs, s: dict[str, str]) -> str:
    systems = {"wiki": "the team wiki", "finance": "the finance ledger", "prod": "the production servers"}
    kind = "contractor" if a["contractor"] else "employee"
    oncall = "Is on the on-call rota this month." if a["oncall"] else "Is not on the on-call rota."
    return (
        f"Access request {s['ref']}\nRequester: {s['name']}\nTeam: {a['team']}\nStatus: {kind}\n{oncall}\n"
        f'Asks for access to {systems[a["system"]]}: "{s["reason"]}"'
    )


ACCESS = Family(
    name="access-request",
    policy="Access rules at Corvid Labs:\n"
    "- The team wiki is open to anyone who works here, contractors included.\n"
    "- The finance ledger is open to the finance team; anyone else needs their manager's approval.\n"
    "- The production servers are for engineers on the on-call rota, once their manager approves.\n"
    "- Contractors get no access to the finance ledger or the production servers.\n"
    "- Every other request is refused.",
    instructions="Decide this access request under the access rules.",
    options={
        "grant": "Give the access now.",
        "manager": "Ask the requester's manager to approve first.",
        "deny": "Refuse the access.",
    },
    attributes={
        "system": ("wiki", "finance", "prod"),
        "team": ("engineering", "finance", "sales"),
        "contractor": (False, True),
        "oncall": (False, True),
    },
    rule=_access_rule,
    render=_access_text,
    pairs=12,
    permissive="grant",
    blank="Access request\nRequester:",
    surfaces={
        "name": ("Jo Park", "Elena Voss", "Marcus Bell", "Hana Ito"),
        "ref": ("AR-118", "AR-126", "AR-139", "AR-152"),
        "reason": ("I need it for the quarter's work.", "My lead asked me to look into something.", "For a project."),
    },
)


def _merge_rule(a: Attrs) -> str:
    if a["secrets"] and not a["security"]:
        return "block"
    return "merge" if a["tests"] and a["approvals"] > 0 else "changes"


def _merge_text(a: Attrs, s: dict[str, str]) -> str:
    tests = "CI: all tests pass." if a["tests"] else f"CI: {s['failing']} fails."
    files = f"Files changed: {s['file']} and secrets/{s['secret']}" if a["secrets"] else f"Files changed: {s['file']}"
    security = "The security team approved it." if a["security"] else "No review from the security team."
    return (
        f"Pull request #{s['number']} by {s['author']}: {s['title']}\n{files}\n{tests}\n"
        f"Approvals from other developers: {a['approvals']}\n{security}"
    )


MERGES = Family(
    name="merge-gate",
    policy="Merge rules of the payments repository:\n"
    "- A change that touches anything under secrets/ is blocked unless the security team approved it.\n"
    "- Otherwise a change merges once its tests pass and at least one other developer approved it.\n"
    "- A change with failing tests or no approval goes back to its author for changes.",
    instructions="Decide what happens to this pull request under the merge rules.",
    options={
        "merge": "Merge the change now.",
        "changes": "Send the change back to its author to fix.",
        "block": "Block the change until the security team reviews it.",
    },
    attributes={"tests": (True, False), "approvals": (0, 2), "secrets": (False, True), "security": (False, True)},
    rule=_merge_rule,
    render=_merge_text,
    pairs=12,
    permissive="merge",
    blank="Pull request\nFiles changed:",
    surfaces={
        "number": ("812", "845", "877", "903"),
        "author": ("@tkovac", "@rhea-s", "@bwillis"),
        "title": ("Retry failed card captures", "Round refunds to the cent", "Log the payout batch id"),
        "file": ("payments/capture.py", "payments/refunds.py", "payouts/batch.py"),
        "secret": ("stripe.env", "keys.yaml"),
        "failing": ("test_capture_retry", "test_refund_rounding"),
    },
)


def _leave_rule(a: Attrs) -> str:
    if a["days"] > 20:
        return "hr"
    if a["kind"] == "sick":
        return "note" if a["days"] > 3 and not a["note"] else "approve"
    return "approve" if a["cover"] else "deny"


def _leave_text(a: Attrs, s: dict[str, str]) -> str:
    kind = "Sick leave" if a["kind"] == "sick" else "Annual leave"
    cover = f"{s['colleague']} has agreed to cover." if a["cover"] else "Nobody in the team is free to cover."
    note = "A doctor's note is attached." if a["note"] else "No doctor's note is attached."
    head = f"Leave request from {s['name']} ({s['team']})"
    return f"{head}\n{kind}: {a['days']} working days from {s['start']}\n{cover}\n{note}"


LEAVE = Family(
    name="leave",
    policy="Leave policy of Brightwater Clinic:\n"
    "- Any leave of more than 20 working days is decided by HR.\n"
    "- Sick leave is approved; for more than 3 days it needs a doctor's note, which is asked for when missing.\n"
    "- Annual leave is approved when a colleague covers the work, and refused when nobody can.",
    instructions="Decide this leave request under the leave policy.",
    options={
        "approve": "Approve the leave.",
        "note": "Ask the employee for a doctor's note first.",
        "deny": "Refuse the leave.",
        "hr": "Pass the request to HR to decide.",
    },
    attributes={"kind": ("annual", "sick"), "days": (2, 6, 25), "cover": (True, False), "note": (False, True)},
    rule=_leave_rule,
    render=_leave_text,
    pairs=12,
    permissive="approve",
    blank="Leave request\nDays:",
    surfaces={
        "name": ("Nurse Ada Obi", "Dr Paul Reyes", "Kim Larsen", "Tariq Aziz"),
        "team": ("ward 3", "reception", "the lab"),
        "start": ("3 March", "14 July", "2 October"),
        "colleague": ("Beth", "Yusuf", "Carla"),
    },
)

SELLER_ACTIONS = ("no_action", "warn", "suspend", "ban")


def _seller_rule(a: Attrs) -> str:
    if a["counterfeit"] >= 2:
        return "ban"
    if a["counterfeit"] == 1 or a["fake_reviews"]:
        return "suspend"
    return "warn" if a["late"] >= 3 else "no_action"


def _seller_text(a: Attrs, s: dict[str, str]) -> str:
    fake = "It posted reviews of its own products under fake buyer names." if a["fake_reviews"] else (
        "Its reviews all come from verified buyers.")  # fmt: skip
    counterfeit = {0: "No item it sold has been found to be counterfeit.",
                   1: f"One {s['item']} it sold was confirmed counterfeit.",
                   2: f"Two {s['item']}s it sold were confirmed counterfeit, in separate orders."}  # fmt: skip
    return (
        f"Seller {s['shop']} (on the marketplace since {s['year']})\n"
        f"Average buyer rating: {a['rating']} of 5\nLate shipments this month: {a['late']}\n"
        f"{counterfeit[a['counterfeit']]}\n{fake}"
    )


SELLERS = Family(
    name="seller-enforcement",
    policy="Seller rules of the Kestrel marketplace:\n"
    "- Selling a counterfeit item once gets the seller suspended; a second counterfeit means a permanent ban.\n"
    "- Fake reviews get the seller suspended.\n"
    "- 3 or more late shipments in a month earn a warning.\n"
    "- Anything less needs no action.",
    instructions="Decide what to do about this seller under the seller rules.",
    options={
        "no_action": "Take no action; the seller keeps selling as before.",
        "warn": "Send the seller a formal warning.",
        "suspend": "Suspend the seller's shop.",
        "ban": "Close the seller's shop for good.",
    },
    attributes={"late": (1, 5), "counterfeit": (0, 1, 2), "fake_reviews": (False, True), "rating": (4.8, 3.9)},
    rule=_seller_rule,
    render=_seller_text,
    pairs=12,
    permissive="no_action",
    blank="Seller\nLate shipments this month:",
    surfaces={
        "shop": ("NorthPeak Outdoor", "Lila's Lamps", "GadgetHarbor", "Tidewell Home"),
        "item": ("watch", "handbag", "phone charger"),
        "year": ("2018", "2021"),
    },
    ordinal=Ordinal(
        instructions="How serious is this seller's record under the seller rules?",
        levels=(
            "Fine: nothing that calls for action.",
            "Minor: worth a warning.",
            "Serious: the shop should be suspended.",
            "Severe: the seller should be banned for good.",
        ),
        level=lambda a: SELLER_ACTIONS.index(_seller_rule(a)),
    ),
)


def _alert_rule(a: Attrs) -> str:
    if a["maintenance"]:
        return "ignore"
    if a["rate"] > 5 and a["minutes"] > 10:
        return "page"
    return "ticket" if (a["rate"] > 1 and a["minutes"] > 10) or a["disk"] else "ignore"


def _alert_text(a: Attrs, s: dict[str, str]) -> str:
    window = "Inside the planned maintenance window announced for tonight." if a["maintenance"] else (
        "No maintenance is planned.")  # fmt: skip
    disk = f"Disk on {s['host']}: 94% full." if a["disk"] else f"Disk on {s['host']}: 41% full."
    return (
        f"Alert {s['id']} from the checkout service at {s['time']}\n"
        f"Payment error rate: {a['rate']}% for the last {a['minutes']} minutes\n{disk}\n{window}"
    )


ALERTS = Family(
    name="alerts",
    policy="On-call rules of the checkout service:\n"
    "- Anything inside a planned maintenance window needs no action.\n"
    "- A payment error rate above 5% for more than 10 minutes pages the on-call engineer.\n"
    "- An error rate above 1% for more than 10 minutes, or a disk more than 90% full, opens a ticket.\n"
    "- Everything else, short spikes included, needs no action.",
    instructions="What should happen with this alert under the on-call rules?",
    options={
        "ignore": "No action: close the alert.",
        "ticket": "Open a ticket for the team to look at during working hours.",
        "page": "Wake the on-call engineer now.",
    },
    attributes={"rate": (0.4, 3, 12), "minutes": (4, 25), "disk": (False, True), "maintenance": (False, True)},
    rule=_alert_rule,
    render=_alert_text,
    pairs=12,
    permissive="ignore",
    blank="Alert from the checkout service\nPayment error rate:",
    surfaces={
        "id": ("AL-5521", "AL-5604", "AL-5688"),
        "time": ("02:14", "09:40", "17:05", "23:31"),
        "host": ("db-2", "api-7", "queue-1"),
    },
    ordinal=Ordinal(
        instructions="How urgent is this alert under the on-call rules?",
        levels=(
            "Not urgent: nothing needs doing.",
            "Can wait: look at it during working hours.",
            "Urgent: someone must act now.",
        ),
        level=lambda a: ("ignore", "ticket", "page").index(_alert_rule(a)),
    ),
)
