"""The token budgets every request keeps, as pure functions over token counts.

Nothing is truncated: a prompt over a limit is a 422 naming the limit and the count.

- Per backend call: prompt + its output tokens (1; a box's generation: its grammar's most) <=
  `branch_limit`, which is min(OPENJEV_MAX_INPUT_TOKENS, the backend's context length) and, for a
  request without TypeSafe's long-context header (`TypeSafe-Danger-Zone-Long-Context: true`), the
  official budget of 32,768 tokens for the state plus its longest question (`STANDARD_INPUT_TOKENS`);
  with the header, up to the model's context within the operator's cap. A question
  branch's prompt is prefix + suffix, its content-free readout's the content-free prefix + suffix; a
  state that leaves no room for any question (prefix + 2 over the limit) is named as the state, a
  question over it by its id (once, however many views it is read in).
- Per request: everything the request sends counts against `total_limit`
  (OPENJEV_MAX_TOTAL_INPUT_TOKENS): the warm-up (the prefix alone), every branch prompt, every
  content-free readout it must make (`content_free_tokens`) and, in the thinking tier, each
  escalation's two calls. The first pass is checked before anything is sent (`check_first_pass`,
  which refuses it with every issue of `first_pass_issues` and else says what it leaves); an
  escalation is made only while its worst case fits what the first pass left (`escalation_cost`).

Early refusal. Tokenizing stops as soon as a prompt is certainly over (`encode_limits`,
`encode_within`), so text far
over a budget costs one encoding round; the 422 then gives the count reached ("at least"). With n
branches, a prefix of p tokens makes the request send at least p (warm-up) + n (p + 1) tokens, so
p > (total_limit - n) / (1 + n) is over whatever the suffixes are; a suffix over branch_limit - 2 is
over whatever the prefix is (the prefix has at least one token, the call one output token).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from openjev.errors import Issue, RequestRejected
from openjev.prompting.encoding import PromptEncoder, PromptTooLong
from openjev.prompting.tokenizer import Segment

TOTAL_LIMIT_NAME = "OPENJEV_MAX_TOTAL_INPUT_TOKENS"
#: TypeSafe's header for its long-context mode; without it a call holds at most `STANDARD_INPUT_TOKENS`.
LONG_CONTEXT_HEADER = "TypeSafe-Danger-Zone-Long-Context"
STANDARD_INPUT_TOKENS = 32768
#: (question id, tokens) pairs.
Counts = Sequence[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class TokenBudget:
    #: The most prompt tokens one backend call may hold, counting its one output token.
    branch_limit: int
    #: The setting (or the backend's context) that sets `branch_limit`, as the 422s name it.
    branch_limit_name: str
    #: The most prompt tokens one request may send, all its calls together.
    total_limit: int

    @classmethod
    def of(
        cls, max_input_tokens: int, max_total_input_tokens: int, context_length: int | None, long_context: bool = True
    ) -> TokenBudget:
        """The smallest of the limits that apply, named (the first named on a tie); `long_context`: the
        request sent the long-context header, else the standard budget applies too."""
        limits = [(max_input_tokens, "OPENJEV_MAX_INPUT_TOKENS")]
        if context_length is not None:
            limits.append((context_length, "the backend's context length"))
        if not long_context:
            limits.append((STANDARD_INPUT_TOKENS, f"the standard budget; `{LONG_CONTEXT_HEADER}: true` allows more"))
        limit, name = min(limits, key=lambda named: named[0])
        return cls(limit, name, max_total_input_tokens)

    def encode_limits(self, branch_count: int, known: int = 0) -> list[int]:
        """Per prompt (the prefix first, then each branch's suffix), a length past which the request is
        over a limit whatever the other lengths (module doc); `known`: prefix tokens already known, not
        encoded again."""
        suffix_limit = self.branch_limit - 2
        total_share = (self.total_limit - branch_count) // (1 + branch_count)
        return [max(0, min(suffix_limit, total_share) - known), *[suffix_limit] * branch_count]

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
            return self.total_issue(tokens * (1 + count) + count, f"warm-up {tokens} + {count} question prompts")
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
                parts = f"state {prefix} + question {suffix} + {output} output"
                issues.append(self.question_issue(question_id, needed, parts, bound=""))
        for question_id, tokens in content_free:
            if tokens + 1 > self.branch_limit and question_id not in refused:
                refused.add(question_id)
                parts = f"its content-free readout {tokens} + 1 output"
                issues.append(self.question_issue(question_id, tokens + 1, parts, bound=""))
        content_free_tokens = sum(tokens for _, tokens in content_free)
        total = self.first_pass_tokens(prefix, [suffix for _, suffix in branches], content_free_tokens)
        if total > self.total_limit:
            parts = f"warm-up {prefix} + {len(branches)} question prompts"
            if content_free:
                plural = "s" if len(content_free) != 1 else ""
                parts += f" + {len(content_free)} content-free readout{plural} of {content_free_tokens}"
            issues.append(self.total_issue(total, parts, bound=""))
        return issues

    def check_first_pass(
        self, prefix: int, branches: Counts, content_free: Counts, generated: Mapping[str, int]
    ) -> int:
        """The prompt tokens the request may still send after its first pass (the thinking tier's);
        RequestRejected with every issue of `first_pass_issues` (same arguments) where there is one."""
        issues = self.first_pass_issues(prefix, branches, content_free, generated)
        if issues:
            raise RequestRejected(issues)
        sent = self.first_pass_tokens(prefix, [suffix for _, suffix in branches], sum(t for _, t in content_free))
        return self.total_limit - sent

    @staticmethod
    def first_pass_tokens(prefix: int, suffixes: Sequence[int], content_free_tokens: int = 0) -> int:
        """Prompt tokens a first pass sends: the warm-up, each branch, the content-free readouts."""
        return prefix + sum(prefix + suffix for suffix in suffixes) + content_free_tokens

    @staticmethod
    def escalation_cost(call_one: int, generated: int, tail: int) -> int:
        """Prompt tokens one escalation sends at most: call 1's prompt, then call 2's (call 1's prompt +
        up to `generated` ids + a close id + the `tail` that carries the answer cue)."""
        return call_one + call_one + generated + 1 + tail

    def question_issue(self, question_id: str, needed: int, parts: str, bound: str = "at least ") -> Issue:
        return Issue(
            ("questions", question_id),
            f"this question needs {bound}{needed} tokens ({parts}), over the limit of {self.branch_limit} "
            f"({self.branch_limit_name})",
            "too_long",
            {"limit": self.branch_limit, "tokens": needed},
        )

    def state_issue(self, prefix: int, bound: str = "") -> Issue:
        return Issue(
            ("state",),
            f"the state needs {bound}{prefix} tokens, leaving no room for a question within the limit of "
            f"{self.branch_limit} ({self.branch_limit_name})",
            "too_long",
            {"limit": self.branch_limit, "tokens": prefix},
        )

    def total_issue(self, total: int, parts: str, bound: str = "at least ") -> Issue:
        return Issue(
            ("questions",),
            f"the request submits {bound}{total} input tokens ({parts}), over {TOTAL_LIMIT_NAME}={self.total_limit}",
            "too_long",
            {"limit": self.total_limit, "tokens": total},
        )
