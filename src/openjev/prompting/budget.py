"""The token budgets every request keeps, counted on the caller's text alone, as pure functions over counts.

Nothing is truncated: a prompt over a limit is a 422 (`context_length_exceeded`) whose message says
"maximum context length" with the limit and the count, in OpenAI's words.

What the caller is charged for is what the caller sent: the state once and each question as sent (its
first view). openjev's own work (a choice's other rotations, a score's reversed rubric, the
content-free readouts, the warm-up, the thinking tier) never counts against a caller's budget.

- Per question (TypeSafe's rule: "32k tokens for the state plus the longest question"): the prefix,
  the question's suffix as sent and its output tokens (1; a box's generation: its grammar's most) <=
  `branch_limit`. Without TypeSafe's long-context header (`TypeSafe-Danger-Zone-Long-Context: true`)
  that is OPENJEV_MAX_INPUT_TOKENS (32,768), within the backend's context; with it, the model's
  context, within OPENJEV_MAX_LONG_CONTEXT_TOKENS where the operator sets one, and never less than
  without it. A state that leaves no room for any question (prefix + 2 over the limit) is named as the
  state, a question over it by its id.
- Per request: the prefix once plus each question's suffix as sent <= `total_limit`. TypeSafe states
  no such figure; it is openjev's own capacity choice, an operator setting: OPENJEV_MAX_TOTAL_INPUT_TOKENS
  where set, else `REQUEST_FACTOR` times `branch_limit` (65,536 without the header: a full-length state
  and as much again of question text). Its 422 names the setting and counts the input once and the
  questions. Over it, the state is named when it alone, with one token per question, is over; else the
  questions.
- openjev's own calls (`check_own_calls`) are a capacity matter: each within `own_call_limit` (the
  model's context, within OPENJEV_MAX_LONG_CONTEXT_TOKENS), else the request is refused with a 529
  (`Overloaded`), never a 422. Their number follows the caller's questions (at most the views of each,
  and a content-free readout each), so the caller's budget bounds them too. The thinking tier's
  escalations are made while their worst case (`escalation_cost`) fits what `total_limit` leaves after
  the caller's text (`check_first_pass`); the rest keep their first-pass answers.

Early refusal, as text arrives (`encode_within`). The caller's prompts are encoded first, in rounds
whose size follows what is left of the budget (`encoding.py`); before every round the counts so far
(lower bounds) are checked, and the first certain excess stops the encoding: the prefix over the
per-question limit, prefix + a suffix + 1 over it, or prefix + all suffixes over the request's. So a
request over budget costs about its budget in tokenizing, however much it sent, and the 422 says the
count reached ("at least"). openjev's own views are encoded after, only for a request within budget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from openjev.config import Settings
from openjev.errors import Issue, Overloaded, RequestRejected
from openjev.prompting.encoding import PromptEncoder
from openjev.prompting.tokenizer import Segment

TOTAL_LIMIT_NAME = "OPENJEV_MAX_TOTAL_INPUT_TOKENS"
#: TypeSafe's header for its long-context mode; without it a call holds OPENJEV_MAX_INPUT_TOKENS at most.
LONG_CONTEXT_HEADER = "TypeSafe-Danger-Zone-Long-Context"
#: TypeSafe's budget per question (the state plus one question), OPENJEV_MAX_INPUT_TOKENS's default.
STANDARD_INPUT_TOKENS = 32768
#: Without OPENJEV_MAX_TOTAL_INPUT_TOKENS a request's own text holds at most this many times
#: `branch_limit`: openjev's capacity choice (module doc), not TypeSafe's.
REQUEST_FACTOR = 2
#: The type of every budget issue: OpenAI's code for a context overflow, which clients act on.
CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"
#: (question id, tokens) pairs.
Counts = Sequence[tuple[str, int]]


def call_limit(settings: Settings, context_length: int | None, long_context: bool) -> tuple[int, str]:
    """The most tokens one call may hold, named as the 422s name it (the first named on a tie)."""
    standard = [(settings.max_input_tokens, "OPENJEV_MAX_INPUT_TOKENS, the standard budget")]
    longer = [(settings.max_long_context_tokens, "OPENJEV_MAX_LONG_CONTEXT_TOKENS")]
    if context_length is not None:
        standard.append((context_length, "the backend's context length"))
        longer.insert(0, (context_length, "the model's context length"))
    limit, name = min(standard, key=lambda named: named[0])
    known = [(value, text) for value, text in longer if value is not None]
    long_limit, long_name = min(known, key=lambda named: named[0]) if known else (limit, name)
    if long_context and long_limit > limit:
        return long_limit, long_name
    return limit, f"{name}; `{LONG_CONTEXT_HEADER}: true` allows more" if long_limit > limit else name


@dataclass(frozen=True, slots=True)
class TokenBudget:
    #: The most tokens one call of a question as sent may hold, counting its output tokens.
    branch_limit: int
    #: The setting (or the backend's context) that sets `branch_limit`, as the 422s name it.
    branch_limit_name: str
    #: The most tokens of the caller's text one request may hold: the prefix once, each question once.
    total_limit: int
    #: What sets `total_limit`, as the 422s name it.
    total_limit_name: str = TOTAL_LIMIT_NAME
    #: The most one call of openjev's own may hold (module doc); None: `branch_limit`.
    own_limit: int | None = None

    @classmethod
    def of(cls, settings: Settings, context_length: int | None, long_context: bool = False) -> TokenBudget:
        """The budget of a request with or without the long-context header (module doc)."""
        limit, name = call_limit(settings, context_length, long_context)
        own = max(limit, call_limit(settings, context_length, long_context=True)[0])
        total = settings.max_total_input_tokens
        if total is not None:
            return cls(limit, name, total, f"{TOTAL_LIMIT_NAME}={total}", own)
        default = f"{TOTAL_LIMIT_NAME} unset: openjev's capacity default, {REQUEST_FACTOR} x {limit} per question"
        return cls(limit, name, REQUEST_FACTOR * limit, default, own)

    @property
    def own_call_limit(self) -> int:
        return self.branch_limit if self.own_limit is None else self.own_limit

    @property
    def reachable(self) -> dict[str, int]:
        """What `/v1/limits` says of this budget: the most one call and one request may hold."""
        return {"per_question": min(self.branch_limit, self.total_limit), "per_request": self.total_limit}

    def encode_within(
        self,
        encoder: PromptEncoder,
        prompts: Sequence[Sequence[Segment]],
        known: int,
        extra: Sequence[int],
        question_ids: Sequence[str],
        asked: Sequence[bool],
    ) -> list[list[int]]:
        """Each prompt's ids (the prefix first, then each branch's suffix, whose question is
        `question_ids[i]` and which is the question as sent where `asked[i]`): the questions as sent
        first, encoding stopped once the caller's text is certainly over a limit (module doc), then
        openjev's own views. `known` prefix tokens are known already, and `extra` says, per prompt, the
        positions it takes beyond its ids (its images)."""
        mine = [0, *(1 + i for i, sent in enumerate(asked) if sent)]
        own = [1 + i for i, sent in enumerate(asked) if not sent]
        watch = self._watch(mine, known, extra, question_ids)
        ids = dict(zip(mine, encoder.encode_many([prompts[i] for i in mine], watch), strict=True))
        prefix = len(ids[0]) + known + extra[0]

        def own_watch(counts: Sequence[int]) -> int:
            for index, tokens in zip(own, counts, strict=True):
                self.check_own_calls([(question_ids[index - 1], prefix + tokens + extra[index])])
            return self.own_call_limit

        if own:
            ids.update(zip(own, encoder.encode_many([prompts[i] for i in own], own_watch), strict=True))
        return [ids[index] for index in range(len(prompts))]

    def _watch(
        self, indices: Sequence[int], known: int, extra: Sequence[int], question_ids: Sequence[str]
    ) -> Callable[[Sequence[int]], int]:
        """What `encode_many` calls before each round with the counts so far of the prompts `indices`
        (the prefix first): the request refused at the first certain excess, else the tokens left."""

        def watch(counts: Sequence[int]) -> int:
            prefix = counts[0] + known + extra[0]
            suffixes = [(index, tokens + extra[index]) for index, tokens in zip(indices[1:], counts[1:], strict=True)]
            if prefix + 2 > self.branch_limit:
                raise RequestRejected([self.state_issue(prefix, "at least ")])
            for index, tokens in suffixes:
                if prefix + tokens + 1 > self.branch_limit:
                    parts = f"the input {prefix} + question {tokens} + 1 output"
                    raise RequestRejected([self.question_issue(question_ids[index - 1], prefix + tokens + 1, parts)])
            total = prefix + sum(tokens for _, tokens in suffixes)
            if total > self.total_limit:
                raise RequestRejected([self._total_issue(prefix, [t for _, t in suffixes], "at least ")])
            return self.total_limit - total

        return watch

    def first_pass_issues(
        self, prefix: int, branches: Counts, generated: Mapping[str, int] | None = None
    ) -> list[Issue]:
        """Every limit the caller's text breaks: `branches` are (question id, suffix tokens) of each
        question as sent; `generated`: the most ids a question's call generates where that is more than
        one (a box's generation)."""
        if prefix + 2 > self.branch_limit:
            return [self.state_issue(prefix)]
        issues = []
        for question_id, suffix in branches:
            output = (generated or {}).get(question_id, 1)
            needed = prefix + suffix + output
            if needed > self.branch_limit:
                parts = f"the input {prefix} + question {suffix} + {output} output"
                issues.append(self.question_issue(question_id, needed, parts, bound=""))
        if self.first_pass_tokens(prefix, [suffix for _, suffix in branches]) > self.total_limit:
            issues.append(self._total_issue(prefix, [suffix for _, suffix in branches], ""))
        return issues

    def check_first_pass(self, prefix: int, branches: Counts, own: Counts, generated: Mapping[str, int]) -> int:
        """What `total_limit` leaves after the caller's text (the thinking tier's room); RequestRejected
        with every issue of `first_pass_issues` (`prefix`, `branches`, `generated`) where there is one,
        else `check_own_calls(own)`."""
        issues = self.first_pass_issues(prefix, branches, generated)
        if issues:
            raise RequestRejected(issues)
        self.check_own_calls(own)
        return self.total_limit - self.first_pass_tokens(prefix, [suffix for _, suffix in branches])

    def check_own_calls(self, own: Counts) -> None:
        """Overloaded (529) where a call of openjev's own, (the first question id it reads for, its whole
        prompt's tokens), with its output token is over `own_call_limit`: a capacity matter, the
        caller's text being within its budget."""
        for question_id, tokens in own:
            if tokens + 1 > self.own_call_limit:
                raise Overloaded(
                    f"openjev's own readout for question {question_id!r} (another view or its content-free "
                    f"readout) needs {tokens + 1} tokens, over this server's {self.own_call_limit} per call; "
                    "the request is within its token budget"
                )

    @staticmethod
    def first_pass_tokens(prefix: int, suffixes: Sequence[int]) -> int:
        """Tokens of the caller's text a request holds: the prefix once, each question's suffix as sent."""
        return prefix + sum(suffixes)

    @staticmethod
    def escalation_cost(own: int, generated: int, tail: int) -> int:
        """Prompt tokens one escalation makes the backend compute at most: call 1's `own` tokens after the
        shared prefix, then call 2's beyond call 1 (up to `generated` ids + a close id + the `tail` that
        carries the answer cue)."""
        return own + generated + 1 + tail

    def question_issue(self, question_id: str, needed: int, parts: str, bound: str = "at least ") -> Issue:
        return self._issue(
            ("questions", question_id), self.branch_limit, f"per question ({self.branch_limit_name})",
            f"this question needs {bound}{needed} tokens ({parts})", needed, "the question or the input",
        )  # fmt: skip

    def state_issue(self, prefix: int, bound: str = "") -> Issue:
        return self._issue(
            ("state",), self.branch_limit, f"per question ({self.branch_limit_name})",
            f"the input alone needs {bound}{prefix} tokens, leaving no room for a question", prefix, "the input",
        )  # fmt: skip

    def _total_issue(self, prefix: int, suffixes: Sequence[int], bound: str) -> Issue:
        """The request's text over `total_limit`: the input named when it is over with one token per
        question, else the questions."""
        count = len(suffixes)
        total = self.first_pass_tokens(prefix, suffixes)
        loc = ("state",) if prefix + count > self.total_limit else ("questions",)
        plural = "s" if count != 1 else ""
        parts = f"the input {prefix} once + {count} question{plural} of {bound}{sum(suffixes)}"
        reduce = "the input" if loc == ("state",) else "the questions"
        return self._issue(
            loc, self.total_limit, f"per request ({self.total_limit_name})",
            f"the request needs {bound}{total} tokens ({parts})", total, reduce,
        )  # fmt: skip

    @staticmethod
    def _issue(loc: tuple[str, ...], limit: int, per: str, needs: str, tokens: int, reduce: str) -> Issue:
        """A budget issue in OpenAI's words for a context overflow, and its type, which clients act on."""
        message = (
            f"This model's maximum context length is {limit} tokens {per}. However, {needs}. "
            f"Please reduce the length of {reduce}."
        )
        return Issue(loc, message, CONTEXT_LENGTH_EXCEEDED, {"limit": limit, "tokens": tokens})
