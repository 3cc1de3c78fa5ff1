"""The hand-written rubrics of `decisions-examples-dev`: score questions whose levels are described, and
the details that put a state on each level (`details[0]`: the level's worked example), as in
`families.py`."""

from __future__ import annotations

from dataclasses import dataclass

from evals.worked_examples.families import Option


@dataclass(frozen=True)
class Rubric:
    name: str
    instructions: str
    #: Low to high: (description, details); details[0] is the level's worked example.
    levels: tuple[Option, ...]
    frames: tuple[str, ...]
    example_frame: str


# fmt: off
URGENCY = Rubric(
    name="urgency",
    instructions="How urgent is this request for the operations team?",
    levels=(
        Option("0", "Can wait: no deadline and nothing is blocked.", (
            "would be nice to update the office plant schedule sometime",
            "at some point could we rename the shared folder",
            "whenever you have time, the printer tray label is faded",
            "no rush, but the wiki page on parking is outdated",
        )),
        Option("1", "This week: something is inconvenient or a deadline is days away.", (
            "the meeting room projector flickers, we present on Thursday",
            "two laptops need setting up for new hires starting next week",
            "the coffee machine in the east wing is out of order",
            "the shared calendar is missing this week's holidays",
        )),
        Option("2", "Today: people are blocked from working right now.", (
            "the whole sales team cannot log in to email this morning",
            "the office wifi is down and nobody can work",
            "payroll cannot run because the finance server is unreachable",
            "the warehouse scanners all stopped working an hour ago",
        )),
    ),
    frames=("Request: {detail}.", "Hi ops, {detail}. Thanks!", "Ticket from facilities: {detail}."),
    example_frame="Note: {detail}.",
)

SATISFACTION = Rubric(
    name="satisfaction",
    instructions="How satisfied is the customer in this review?",
    levels=(
        Option("0", "Very unhappy: angry, wants money back or warns others.", (
            "a total scam, I want my money back and I am telling everyone",
            "worst purchase of my life, it broke on day one and support ignored me",
            "avoid this shop, they lied about the delivery and kept my money",
            "furious: it never worked and nobody answers the phone",
        )),
        Option("1", "Disappointed: it works but falls short of what was promised.", (
            "it works, but it is slower than advertised",
            "okay product, though the battery lasts half of what they claim",
            "a bit disappointing, the colour is duller than on the website",
            "does the job, but feels cheap for the price",
        )),
        Option("2", "Satisfied: it does what was promised.", (
            "does exactly what it says, arrived on time",
            "good value and works as described",
            "solid product, no complaints",
            "fine purchase, it meets my needs",
        )),
        Option("3", "Delighted: better than expected, recommends it warmly.", (
            "absolutely love it, better than I hoped, buying another for my sister",
            "outstanding, exceeded every expectation, five stars",
            "amazing quality and the support team went above and beyond",
            "best thing I bought this year, I recommend it to everyone",
        )),
    ),
    frames=("Review: \"{detail}.\"", "Customer review (verified purchase): {detail}.", "{detail}. -- Luca R."),
    example_frame="Review: {detail}.",
)

# fmt: on
RUBRICS = (URGENCY, SATISFACTION)
