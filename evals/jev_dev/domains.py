"""The office domains of the `jev-dev` generator (grading, contracts, hiring) and the list of all six.

Templates and their gold rules: evals/jev_dev/templates.py.
"""

from __future__ import annotations

from evals.jev_dev.templates import INCIDENTS, RETURNS, SUPPORT, Count, Domain, Flag, Pick, Rubric

GRADING = Domain(
    "grading",
    "Essay submission {ref} by {name}, {org} writing course. Marker's notes:",
    (
        Flag(
            "Do the notes say the essay cites its sources?",
            "Every claim is backed by a cited source.",
            "The essay does not cite a single source.",
        ),
        Flag(
            "Do the notes say the essay was submitted late?",
            "The essay came in after the deadline.",
            "The essay was handed in on time.",
        ),
        Flag(
            "Do the notes say the essay has a clear thesis?",
            "The thesis is stated clearly in the first paragraph.",
            "There is no clear thesis anywhere in the essay.",
        ),
    ),
    (
        Count("Is the essay longer than {t} words?", "The essay is {n} words long.", 200, 3000),
        Count("Are there more than {t} spelling mistakes?", "I counted {n} spelling mistakes.", 0, 30),
    ),
    (
        Pick(
            "What is the essay's main topic?",
            (
                ("climate", "Climate policy", "The essay argues for a carbon tax."),
                ("history", "History", "The essay discusses the causes of the First World War."),
                ("tech", "Technology", "The essay looks at how smartphones changed reading habits."),
                ("none", "The notes do not say", None),
            ),
        ),
        Pick(
            "What should the student work on first?",
            (
                (
                    "structure",
                    "Structure and paragraphing",
                    "The main weakness is the structure: the paragraphs jump between ideas.",
                ),
                ("evidence", "Use of evidence", "The main weakness is the evidence: most claims are unsupported."),
                (
                    "style",
                    "Style and grammar",
                    "The main weakness is the grammar, which gets in the way of the argument.",
                ),
            ),
        ),
    ),
    (
        Rubric(
            "Grade the essay on the exam scale from its raw mark out of 100.",
            "The raw mark is {n} out of 100.",
            (
                ("Fail: below 40", 0, 39),
                ("Pass: 40 to 59", 40, 59),
                ("Merit: 60 to 79", 60, 79),
                ("Distinction: 80 or above", 80, 100),
            ),
        ),
        Rubric(
            "Rate the essay's use of sources.",
            "The essay uses {n} distinct sources.",
            (
                ("Poor: no sources", 0, 0),
                ("Adequate: 1 to 3 sources", 1, 3),
                ("Strong: 4 or more sources", 4, 20),
            ),
        ),
    ),
)

CONTRACTS = Domain(
    "contracts",
    "Contract summary {ref}: services agreement between {org} and a supplier, reviewed by {name}.",
    (
        Flag(
            "Does the contract renew automatically?",
            "The agreement renews automatically each year unless cancelled.",
            "The agreement does not renew automatically; a new one must be signed.",
        ),
        Flag(
            "Does the contract include a penalty for late delivery?",
            "The supplier pays a penalty for every week of late delivery.",
            "There is no penalty for late delivery.",
        ),
        Flag(
            "Does the contract allow subcontracting?",
            "The supplier may subcontract parts of the work.",
            "Subcontracting is not allowed under this agreement.",
        ),
    ),
    (
        Count("Is the contract value above ${t},000?", "The total contract value is ${n},000.", 5, 900),
        Count(
            "Is the notice period longer than {t} days?", "Either party may terminate with {n} days of notice.", 7, 180
        ),
    ),
    (
        Pick(
            "Which law governs the contract?",
            (
                ("ny", "New York law", "The contract is governed by the laws of New York."),
                ("eng", "English law", "The contract is governed by the laws of England and Wales."),
                ("de", "German law", "The contract is governed by German law."),
                ("none", "The governing law is not stated", None),
            ),
        ),
        Pick(
            "What kind of service does the supplier provide?",
            (
                ("cleaning", "Office cleaning", "The supplier cleans the offices three times a week."),
                ("it", "IT support", "The supplier runs the help desk and maintains the laptops."),
                ("catering", "Catering", "The supplier provides lunch for the staff canteen."),
                ("security", "Security", "The supplier guards the building at night."),
                ("logistics", "Logistics", "The supplier delivers goods between the warehouses."),
            ),
        ),
    ),
    (
        Rubric(
            "Rate the length of the commitment.",
            "The initial term is {n} months.",
            (
                ("Short: up to 6 months", 1, 6),
                ("Medium: 7 to 24 months", 7, 24),
                ("Long: more than 24 months", 25, 120),
            ),
        ),
        Rubric(
            "Rate the supplier's liability cap.",
            "The supplier's liability is capped at ${n},000.",
            (
                ("Minimal: under $10,000", 1, 9),
                ("Low: $10,000 to $49,000", 10, 49),
                ("Limited: $50,000 to $99,000", 50, 99),
                ("Moderate: $100,000 to $249,000", 100, 249),
                ("Substantial: $250,000 to $499,000", 250, 499),
                ("High: $500,000 to $999,000", 500, 999),
                ("Very high: $1,000,000 or more", 1000, 5000),
            ),
        ),
    ),
)

HIRING = Domain(
    "hiring",
    "Candidate screening notes {ref}: {name}, applying to {org}.",
    (
        Flag(
            "Do the notes say the candidate needs visa sponsorship?",
            "The candidate will need visa sponsorship.",
            "The candidate does not need visa sponsorship.",
        ),
        Flag(
            "Do the notes say the candidate can start within a month?",
            "The candidate can start within two weeks.",
            "The candidate cannot start before the end of next quarter.",
        ),
        Flag(
            "Do the notes say the candidate has managed a team?",
            "The candidate led a team in the last job.",
            "The candidate has never managed anyone.",
        ),
    ),
    (
        Count(
            "Does the candidate have more than {t} years of experience?",
            "The candidate has {n} years of relevant experience.",
            0,
            25,
        ),
        Count("Is the salary expectation above ${t},000?", "The salary expectation is ${n},000 a year.", 40, 250),
    ),
    (
        Pick(
            "Which role fits the candidate best?",
            (
                ("backend", "Backend engineer", "Most of the candidate's work has been on databases and APIs."),
                ("frontend", "Frontend engineer", "Most of the candidate's work has been on web interfaces."),
                ("data", "Data analyst", "Most of the candidate's work has been on dashboards and reports."),
                ("design", "Product designer", "Most of the candidate's work has been on user research and mock-ups."),
            ),
        ),
        Pick(
            "Where does the candidate want to work?",
            (
                ("remote", "Fully remote", "The candidate wants to work fully remote."),
                ("office", "In the office", "The candidate wants to be in the office every day."),
                ("hybrid", "Hybrid", "The candidate wants to split the week between home and the office."),
                ("none", "The notes do not say", None),
            ),
        ),
    ),
    (
        Rubric(
            "Rate the candidate's seniority from the years of experience.",
            "Altogether the candidate has worked {n} years in the field.",
            (
                ("Intern: under 1 year", 0, 0),
                ("Junior: 1 to 2 years", 1, 2),
                ("Mid-level: 3 to 5 years", 3, 5),
                ("Senior: 6 to 9 years", 6, 9),
                ("Staff: 10 to 14 years", 10, 14),
                ("Principal: 15 to 19 years", 15, 19),
                ("Distinguished: 20 years or more", 20, 40),
            ),
        ),
        Rubric(
            "Rate how well the interview went, by the number of the panel's 5 interviewers who voted to hire.",
            "{n} of the 5 interviewers voted to hire.",
            (
                ("Poor: at most 1 vote to hire", 0, 1),
                ("Mixed: 2 or 3 votes to hire", 2, 3),
                ("Strong: 4 or 5 votes to hire", 4, 5),
            ),
        ),
    ),
)

DOMAINS = (SUPPORT, RETURNS, INCIDENTS, GRADING, CONTRACTS, HIRING)
