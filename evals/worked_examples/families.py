"""The hand-written families of `decisions-examples-dev`: questions with described options, and the
details that decide them.

Each `Family` is one recurring question as a user would ask it: instructions (a written policy
first, where there is one), options keyed by name with a one-sentence description, and for each
option the details that make it the answer: `details[0]` is kept for the option's worked example,
the rest are written into test states. A state is one of the family's frames with a detail in it,
so the two halves of a pair differ by that detail alone. Every name, amount and event is invented.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Option:
    key: str
    what: str
    #: details[0]: the worked example's; details[1:]: the test states'.
    details: tuple[str, ...]


@dataclass(frozen=True)
class Family:
    name: str
    instructions: str
    options: tuple[Option, ...]
    #: Test states: each holds `{detail}` once.
    frames: tuple[str, ...]
    #: The worked examples' frame (never a test frame).
    example_frame: str


# fmt: off
SUPPORT = Family(
    name="support-routing",
    instructions="Route this customer message to the team that should handle it.",
    options=(
        Option("billing", "Charges, invoices, refunds of payments and payment methods.", (
            "my card was charged twice for the same order",
            "the invoice shows a price higher than the one I agreed to",
            "I paid but the payment page says it failed and I still see the money gone",
            "I need my VAT number added to last month's invoice",
            "you took the annual fee although I chose monthly payments",
        )),
        Option("technical", "The product does not work: errors, crashes, features that fail.", (
            "the app crashes whenever I open the settings page",
            "the export button gives an error 500",
            "the sync stopped working after the last update",
            "I cannot log in because the password reset link is broken",
            "the dashboard shows a blank page in every browser",
        )),
        Option("shipping", "Where a physical order is, late or lost deliveries, wrong addresses.", (
            "the parcel tracking has not moved for nine days",
            "the courier left my package at the wrong address",
            "my order was supposed to arrive last Tuesday and it is still not here",
            "the box arrived but it was empty",
            "I need to change the delivery address of the order I placed today",
        )),
        Option("account", "Profile details, user seats, permissions and account ownership.", (
            "I want to change the email address on my profile",
            "please add two more user seats for my colleagues",
            "the admin left the company and we need to transfer ownership",
            "I need to give my assistant read-only access",
            "please merge my two accounts into one",
        )),
        Option("cancellation", "The customer wants to end the subscription or close the account.", (
            "I want to cancel my subscription at the end of this month",
            "please close my account, I am moving to another provider",
            "stop my plan from renewing next year",
            "I no longer need the service, end it today",
            "how do I terminate the contract before it renews",
        )),
    ),
    frames=(
        "Hello, {detail}. Can someone help? Order 4471.",
        "Hi team,\n{detail}.\nThanks, Mira",
        "Subject: urgent\n\nGood morning. I am writing because {detail}. Please reply soon.",
        "{detail} -- sent from my phone",
    ),
    example_frame="Hey, {detail}. What can you do?",
)

EXPENSES = Family(
    name="expense-policy",
    instructions=(
        "Policy: meals up to $60 per person and taxis up to $80 are approved with a receipt. Anything over "
        "those limits, and any flight, needs a manager. Alcohol, personal items, and any claim without a "
        "receipt are rejected.\nDecide what happens to this expense claim."
    ),
    options=(
        Option("approve", "The claim follows the policy and is paid.", (
            "a $42 lunch with a client, receipt attached",
            "a $35 taxi to the airport, receipt attached",
            "a $58 team dinner for one person, receipt attached",
            "a $70 taxi from the station to the office, receipt attached",
            "a $19 sandwich during the conference, receipt attached",
        )),
        Option("escalate", "The claim is over a limit or is a flight: a manager must decide.", (
            "a $140 dinner for one person, receipt attached",
            "a $95 taxi across the city, receipt attached",
            "a $320 flight to the Berlin office, receipt attached",
            "a $210 lunch for one person, receipt attached",
            "a $460 return flight for the trade fair, receipt attached",
        )),
        Option("reject", "The claim is for alcohol, a personal item, or has no receipt.", (
            "a $30 bottle of wine for the hotel room, receipt attached",
            "a $25 taxi with no receipt",
            "a $45 pair of headphones for personal use, receipt attached",
            "a $38 round of beers after work, receipt attached",
            "a $50 lunch, the receipt was lost",
        )),
    ),
    frames=(
        "Expense claim from Tom Becker: {detail}.",
        "Claim #2291. Employee: Aiko Tanaka. Item: {detail}. Submitted Friday.",
        "Dana submitted {detail} for last week's trip.",
        "New claim: {detail}. Cost centre: sales.",
    ),
    example_frame="Example claim: {detail}.",
)

MODERATION = Family(
    name="moderation",
    instructions=(
        "Community policy: threats of violence and sharing someone's private address are removed. Insults "
        "aimed at another member get a warning. Links selling products are spam. Everything else, including "
        "strong criticism of ideas or products, is allowed.\nWhat should happen to this post?"
    ),
    options=(
        Option("allow", "The post breaks no rule and stays up.", (
            "this update is the worst design decision the team has ever made",
            "I strongly disagree with the new pricing, it is unfair to small users",
            "the referee was terrible tonight and the league should review the match",
            "honestly the sequel is boring and far too long",
            "this policy is misguided and I will vote against it",
        )),
        Option("warn", "The post insults another member: it stays, and its author is warned.", (
            "@sam you are an idiot and nobody here likes you",
            "only a complete moron like @lea would believe that",
            "@kim you are pathetic, go back to school",
            "@jo stop posting, you clown",
            "@max is too stupid to understand basic maths",
        )),
        Option("remove", "The post threatens violence or shares a private address: it is taken down.", (
            "I know where you live, 14 Elm Road, and I am coming over",
            "if I see @sam at the meetup I will break his nose",
            "here is @lea's home address: 22 Mill Street, flat 3, go visit her",
            "someone should burn down @kim's house tonight",
            "@jo lives at 9 Park Lane, let's all show up there",
        )),
        Option("spam", "The post advertises or sells products: it is removed as spam.", (
            "cheap watches 80% off, buy now at watches-deal dot shop",
            "earn $500 a day from home, click my link to join",
            "best protein powder discount code SAVE50 at fitshop dot biz",
            "buy followers now, 1000 for $5 at grow-fast dot net",
            "replica sneakers shipped worldwide, order at kicks4less dot com",
        )),
    ),
    frames=(
        "Post by user_8812: \"{detail}\"",
        "Reported comment on the thread 'Weekend plans': {detail}",
        "New reply: {detail}!!",
        "Forum message (flagged by 2 users): {detail}.",
    ),
    example_frame="Comment: \"{detail}\"",
)

TOOLS = Family(
    name="tool-routing",
    instructions="Which tool should the assistant call to answer the user's request?",
    options=(
        Option("weather", "Forecasts and current weather for a place.", (
            "will it rain in Lisbon tomorrow",
            "what is the temperature in Oslo right now",
            "do I need an umbrella in Paris this afternoon",
            "is there snow expected in Denver this weekend",
            "how windy will it be in Dublin on Friday",
        )),
        Option("calendar", "Reading or changing the user's own meetings and events.", (
            "move my 3 pm meeting with Priya to Thursday",
            "what do I have on my schedule next Monday",
            "book a one-hour slot with Omar tomorrow morning",
            "cancel the team sync on Friday",
            "when is my next dentist appointment",
        )),
        Option("calculator", "Arithmetic on numbers the user gives.", (
            "what is 17.5 percent of 2,340",
            "multiply 48 by 1,250",
            "divide 9,870 by 35",
            "what is 3,400 minus 1,875 plus 220",
            "what is the square root of 7,225",
        )),
        Option("web_search", "Facts about the world that need a search of the web.", (
            "who won the chess olympiad last year",
            "what are the opening hours of the city museum",
            "find reviews of the new Harbor Foods restaurant",
            "what is the population of Montevideo",
            "which company makes the Orbit X2 headphones",
        )),
        Option("email", "Writing, sending or reading the user's email.", (
            "send Grace the slides from this morning",
            "reply to Jonas that I will be late",
            "did Nina answer my email about the contract",
            "draft a thank-you note to the Cedar Health team and send it",
            "forward the invoice email to accounting",
        )),
        Option("translate", "Putting a given text into another language.", (
            "how do you say 'the meeting is postponed' in Japanese",
            "translate 'where is the train station' into Italian",
            "put this sentence into German: we ship on Mondays",
            "what is 'thank you for your patience' in Spanish",
            "turn 'please sign the attached form' into French",
        )),
    ),
    frames=(
        "User: {detail}?",
        "User: hey, quick one: {detail}?",
        "User: Please help me. {detail}. Thanks!",
        "User: {detail}, as soon as you can.",
    ),
    example_frame="User: {detail}",
)

RETURNS = Family(
    name="returns-policy",
    instructions=(
        "Return policy: unopened items returned within 30 days get a full refund. Opened items within 30 days "
        "are exchanged only. Items returned between 31 and 90 days get store credit. After 90 days, or for "
        "items damaged by the customer, the return is denied; items that arrived defective are always "
        "refunded.\nHow should this return be handled?"
    ),
    options=(
        Option("refund", "The customer gets the money back.", (
            "a blender still sealed in its box, bought 12 days ago",
            "a lamp that arrived with a cracked base, bought 70 days ago",
            "unopened headphones bought 25 days ago",
            "a kettle that was broken when delivered 5 days ago",
            "a sealed board game bought 3 days ago",
        )),
        Option("exchange", "The item is swapped for another one; no money back.", (
            "a blender used twice, bought 12 days ago",
            "opened headphones that work fine, bought 25 days ago",
            "a jacket worn once, bought 9 days ago",
            "an opened board game with all pieces, bought 3 days ago",
            "a toaster the customer tried and disliked, bought 20 days ago",
        )),
        Option("store_credit", "The customer gets credit for a later purchase.", (
            "a sealed blender bought 45 days ago",
            "opened headphones bought 60 days ago",
            "a jacket with its tags on, bought 80 days ago",
            "an unused toaster bought 35 days ago",
            "a board game bought 50 days ago",
        )),
        Option("deny", "No refund, exchange or credit is given.", (
            "a blender bought 120 days ago",
            "headphones the customer dropped in the sea, bought 10 days ago",
            "a jacket bought 7 months ago",
            "a toaster the customer's child broke, bought 15 days ago",
            "a board game bought 95 days ago",
        )),
    ),
    frames=(
        "Return request: {detail}.",
        "Customer Sofia Alvarez brings back {detail}. She has the receipt.",
        "Store note: return of {detail}, processed at the front desk.",
        "Online return #5530: {detail}.",
    ),
    example_frame="Return: {detail}.",
)

ACTIONS = Family(
    name="action-review",
    instructions=(
        "Policy for the coding agent: it may read files and run the test suite freely. It must ask the user "
        "before installing packages or sending anything over the network. It must never delete files outside "
        "the project folder or push to the main branch.\nReview the agent's proposed action."
    ),
    options=(
        Option("allow", "The action is permitted and may run now.", (
            "read the file src/parser.py",
            "run the unit tests with pytest",
            "open README.md to check the setup steps",
            "run the test suite again after the fix",
            "list the files in the tests folder",
        )),
        Option("ask_user", "The action needs the user's approval first.", (
            "install the requests package with pip",
            "upload the log file to a paste website",
            "install numpy 2.1 into the environment",
            "call the weather API over the network to fetch sample data",
            "send the test report to the team chat",
        )),
        Option("block", "The action is forbidden and must not run.", (
            "delete the folder /home/user/photos",
            "push the commit directly to the main branch",
            "remove every file in /etc",
            "force-push to main to fix the history",
            "delete the user's Downloads folder to free space",
        )),
    ),
    frames=(
        "Proposed action: {detail}.",
        "The agent wants to {detail} before continuing with the task.",
        "Step 4 of the plan: {detail}.",
        "Agent: I will now {detail}.",
    ),
    example_frame="Action: {detail}.",
)

TRIAGE = Family(
    name="bug-triage",
    instructions="Classify this bug report by its kind of impact.",
    options=(
        Option("crash", "The program stops or closes unexpectedly.", (
            "the app closes itself when I rotate the phone",
            "the editor quits without a message when I paste an image",
            "the server process dies every night at 2 am",
            "the game freezes and then exits when the level loads",
            "the installer terminates halfway with a segmentation fault",
        )),
        Option("data_loss", "Saved user data is deleted, corrupted or overwritten.", (
            "my saved drafts disappeared after the update",
            "the sync replaced my notes with an older version",
            "exported spreadsheets are corrupted and lose their last column",
            "deleting one contact removed the whole address book",
            "the backup restore wiped the photos taken this year",
        )),
        Option("performance", "Everything works but too slowly or with too many resources.", (
            "search takes forty seconds on a small mailbox",
            "the laptop fan spins at full speed while the app is idle",
            "opening a 2 MB file takes a minute",
            "memory use grows to 8 GB after an hour",
            "scrolling the feed stutters on every phone we tried",
        )),
        Option("cosmetic", "Only the look is wrong: layout, colours, typos.", (
            "the logo overlaps the menu on small screens",
            "there is a typo in the welcome message",
            "the dark mode shows white text on a light grey button",
            "icons in the sidebar are misaligned by a few pixels",
            "the date on the receipt uses the wrong font",
        )),
    ),
    frames=(
        "Bug report: {detail}.",
        "Title: problem since version 4.2\nDescription: {detail}. Steps: use the app normally.",
        "From the beta channel: {detail}. Seen on two devices.",
        "Ticket 8810 - {detail}.",
    ),
    example_frame="Report: {detail}.",
)

# fmt: on
CHOICE_FAMILIES = (SUPPORT, EXPENSES, MODERATION, TOOLS, RETURNS, ACTIONS, TRIAGE)
