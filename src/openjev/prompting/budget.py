"""The token budgets every request keeps, counted as the backend computes, as pure functions over counts.

Nothing is truncated: a prompt over a limit is a 422 (`context_length_exceeded`) whose message says
"maximum context length" with the limit and the count, in OpenAI's words.

- Per backend call: prompt + its output tokens (1; a box's generation: its grammar's most) <=
  `branch_limit`. Without TypeSafe's long-context header (`TypeSafe-Danger-Zone-Long-Context: true`)
  that is OPENJEV_MAX_INPUT_TOKENS (TypeSafe's 32,768 for the state plus one question), within the
  backend's context; with it, the model's context, within OPENJEV_MAX_LONG_CONTEXT_TOKENS where the
  operator sets one, and never less than without it. A question branch's prompt is prefix + suffix,
  its content-free readout's the content-free prefix + suffix; a state that leaves no room for any
  question (prefix + 2 over the limit) is named as the state, a question over it by its id (once,
  however many views it is read in).
- Per request: what the backend computes counts against `total_limit`: the shared prefix once (the
  warm-up computes it, every branch reuses it from the prefix cache), each branch's own suffix, every
  content-free readout it must make (`content_free_tokens`, whole: its prefix is not the request's)
  and, in the thinking tier, each escalation's own tokens. The limit is OPENJEV_MAX_TOTAL_INPUT_TOKENS
  where the operator sets it, else `REQUEST_FACTOR` times `branch_limit` (65,536 without the header:
  a full-length state and as much again of question text). Over it, the state is named when it
  alone, with one token per call, is over; else the questions. The first pass is checked before
  anything is sent (`check_first_pass`, which refuses it with every issue of `first_pass_issues` and
  else says what it leaves); an escalation is made only while its worst case fits what the first
  pass left (`escalation_cost`).

Early refusal. Tokenizing stops as soon as a prompt is certainly over (`encode_limits`,
`encode_within`), so text far over a budget costs one encoding round; the 422 then gives the count
reached ("at least"). With n branches of at least one token each, a prefix of p tokens makes the
request compute at least p + n tokens, so p > total_limit - n is over whatever the suffixes are; a
suffix over branch_limit - 2 is over whatever the prefix is (the prefix has at least one token, the
call one output token).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from openjev.config import Settings
from openjev.errors import Issue, RequestRejected
from openjev.prompting.encoding import PromptEncoder, PromptTooLong
from openjev.prompting.tokenizer import Segment

TOTAL_LIMIT_NAME = "OPENJEV_MAX_TOTAL_INPUT_TOKENS"
#: TypeSafe's header for its long-context mode; without it a call holds OPENJEV_MAX_INPUT_TOKENS at most.
LONG_CONTEXT_HEADER = "TypeSafe-Danger-Zone-Long-Context"
#: TypeSafe's budget per question (the state plus one question), OPENJEV_MAX_INPUT_TOKENS's default.
STANDARD_INPUT_TOKENS = 32768
#: Without OPENJEV_MAX_TOTAL_INPUT_TOKENS a request computes at most this many times `branch_limit`.
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
    #: The most prompt tokens one backend call may hold, counting its one output token.
    branch_limit: int
    #: The setting (or the backend's context) that sets `branch_limit`, as the 422s name it.
    branch_limit_name: str
    #: The most prompt tokens one request may make the backend compute, all its calls together.
    total_limit: int
    #: What sets `total_limit`, as the 422s name it.
    total_limit_name: str = TOTAL_LIMIT_NAME

    @classmethod
    def of(cls, settings: Settings, context_length: int | None, long_context: bool = False) -> TokenBudget:
        """The budget of a request with or without the long-context header (module doc)."""
        limit, name = call_limit(settings, context_length, long_context)
        total = settings.max_total_input_tokens
        if total is not None:
            return cls(limit, name, total, f"{TOTAL_LIMIT_NAME}={total}")
        return cls(
            limit, name, REQUEST_FACTOR * limit, f"{REQUEST_FACTOR} x {limit} per question; {TOTAL_LIMIT_NAME} unset"
        )

    @property
    def reachable(self) -> dict[str, int]:
        """What `/v1/limits` says of this budget: the most one call and one request may hold."""
        return {"per_question": min(self.branch_limit, self.total_limit), "per_request": self.total_limit}

    def encode_limits(self, branch_count: int, known: int = 0) -> list[int]:
        """Per prompt (the prefix first, then each branch's suffix), a length past which the request is
        over a limit whatever the other lengths (module doc); `known`: prefix tokens already known, not
        encoded again."""
        suffix_limit = self.branch_limit - 2
        return [max(0, min(suffix_limit, self.total_limit - branch_count) - known), *[suffix_limit] * branch_count]

    def encode_within(
        self,
        encoder: PromptEncoder,
        prompts: Sequence[Sequence[Segment]],
        known: int,
        extra: Sequence[int],
        question_ids: Sequence[str],
    ) -> list[list[int]]:
        """Each prompt's ids (the prefix first, then each branch's suffix, whose question is
        `question_ids[i]`), encoding stopped and the request refused (`early_issue`) once one is
        certainly over: `known` prefix tokens are known already, and `extra` says, per prompt, the
        positions it takes beyond its ids (its images)."""
        caps = self.encode_limits(len(question_ids), known)
        try:
            return encoder.encode_many(prompts, [max(0, cap - more) for cap, more in zip(caps, extra, strict=True)])
        except PromptTooLong as over:
            tokens = over.tokens + extra[over.index] + (known if over.index == 0 else 0)
            raise RequestRejected([self.early_issue(over.index, tokens, question_ids)]) from None

    def early_issue(self, index: int, tokens: int, question_ids: Sequence[str]) -> Issue:
        """The issue for prompt `index` (0: the prefix, i: the suffix of branch i - 1, whose question is
        `question_ids[i - 1]`) found at `tokens` tokens, over its `encode_limits` entry."""
        if index == 0 and tokens > self.branch_limit - 2:
            return self.state_issue(tokens, "at least ")
        if index == 0:
            count = len(question_ids)
            return self.total_issue(tokens + count, f"the input {tokens} + {count} question prompts", ("state",))
        return self.question_issue(question_ids[index - 1], tokens + 2, f"its question text alone {tokens}")

    def first_pass_issues(
        self,
        prefix: int,
        branches: Counts,
        content_free: Counts = (),
        generated: Mapping[str, int] | None = None,
    ) -> list[Issue]:
        """Every limit a first pass breaks: `branches` are (question id, suffix tokens); `content_free`, the
        content-free readouts it must make, each (the first question id reading it, prompt tokens): one
        is a backend call of its own, within `branch_limit` like a branch (its prefix, the content-free
        state's, may be longer than a short state's); `generated`: the most ids a question's call
        generates where that is more than one (a box's generation)."""
        if prefix + 2 > self.branch_limit:
            return [self.state_issue(prefix)]
        issues = []
        refused: set[str] = set()
        for question_id, suffix in branches:
            output = (generated or {}).get(question_id, 1)
            needed = prefix + suffix + output
            if needed > self.branch_limit and question_id not in refused:
                refused.add(question_id)
                parts = f"the input {prefix} + question {suffix} + {output} output"
                issues.append(self.question_issue(question_id, needed, parts, bound=""))
        for question_id, tokens in content_free:
            if tokens + 1 > self.branch_limit and question_id not in refused:
                refused.add(question_id)
                parts = f"its content-free readout {tokens} + 1 output"
                issues.append(self.question_issue(question_id, tokens + 1, parts, bound=""))
        content_free_tokens = sum(tokens for _, tokens in content_free)
        total = self.first_pass_tokens(prefix, [suffix for _, suffix in branches], content_free_tokens)
        if total > self.total_limit:
            parts = f"the input {prefix} once + {len(branches)} question prompts"
            if content_free:
                plural = "s" if len(content_free) != 1 else ""
                parts += f" + {len(content_free)} content-free readout{plural} of {content_free_tokens}"
            # The input is the problem when it is over with one token per call; else the questions are.
            loc = ("state",) if prefix + len(branches) > self.total_limit else ("questions",)
            issues.append(self.total_issue(total, parts, loc, bound=""))
        return issues

    def check_first_pass(
        self, prefix: int, branches: Counts, content_free: Counts, generated: Mapping[str, int]
    ) -> int:
        """The prompt tokens the request may still make the backend compute after its first pass (the
        thinking tier's); RequestRejected with every issue of `first_pass_issues` (same arguments) where
        there is one."""
        issues = self.first_pass_issues(prefix, branches, content_free, generated)
        if issues:
            raise RequestRejected(issues)
        sent = self.first_pass_tokens(prefix, [suffix for _, suffix in branches], sum(t for _, t in content_free))
        return self.total_limit - sent

    @staticmethod
    def first_pass_tokens(prefix: int, suffixes: Sequence[int], content_free_tokens: int = 0) -> int:
        """Prompt tokens a first pass makes the backend compute: the prefix once, each branch's suffix,
        the content-free readouts."""
        return prefix + sum(suffixes) + content_free_tokens

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

    def total_issue(self, total: int, parts: str, loc: tuple[str, ...], bound: str = "at least ") -> Issue:
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
