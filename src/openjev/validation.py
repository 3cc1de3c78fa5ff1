"""Request checks that depend on settings, reported exactly like FastAPI's own 422 errors.

Pydantic already enforced the static shape (types, required fields, non-empty ids). These checks
add the limits an operator configures and the semantic rules of the contract, each naming the
offending field in `loc` (always starting with "body"). All of them run before any backend work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fastapi.exceptions import RequestValidationError

from openjev.config import Settings
from openjev.schema import BoxQuestion, ChoiceQuestion, NoulQuestion, ScoreQuestion, SystemOneRequest


@dataclass(frozen=True, slots=True)
class Issue:
    loc: tuple[str | int, ...]
    msg: str
    type: str = "value_error"
    ctx: dict[str, Any] | None = None

    def as_error(self) -> dict[str, Any]:
        error: dict[str, Any] = {"loc": ("body", *self.loc), "msg": self.msg, "type": self.type}
        if self.ctx is not None:
            error["ctx"] = self.ctx
        return error


def reject(issues: Sequence[Issue]) -> RequestValidationError:
    return RequestValidationError([issue.as_error() for issue in issues])


#: Image assets arrive as an `assets` field or as a multipart body; both are refused the same way.
ASSETS_REFUSED = Issue(("assets",), "image assets need a vision model; this deployment reads text only", "unsupported")


def _present(value: Any) -> bool:
    return value is not None and value != ""


def check_request(request: SystemOneRequest, settings: Settings) -> list[Issue]:
    issues: list[Issue] = []
    if request.assets is not None:
        issues.append(ASSETS_REFUSED)
    if len(request.questions) > settings.max_questions:
        issues.append(
            Issue(
                ("questions",),
                f"at most {settings.max_questions} questions per request, got {len(request.questions)}",
                "too_long",
                {"max_length": settings.max_questions, "actual_length": len(request.questions)},
            )
        )
    for question_id, question in request.questions.items():
        loc = ("questions", question_id)
        if isinstance(question, BoxQuestion):
            issues.append(
                Issue(
                    (*loc, "type"),
                    "box questions need a vision model; this deployment reads text only",
                    "unsupported",
                )
            )
        elif isinstance(question, NoulQuestion):
            criteria = question.criteria
            described = criteria is not None and (_present(criteria.true) or _present(criteria.false))
            if not _present(question.instructions) and not described:
                issues.append(Issue(loc, "a noul question needs instructions or a described true/false outcome"))
        elif isinstance(question, ChoiceQuestion):
            count = len(question.criteria)
            if not 2 <= count <= settings.max_choice_options:
                issues.append(
                    Issue(
                        (*loc, "criteria"),
                        f"a choice question needs 2 to {settings.max_choice_options} options, got {count}",
                        "too_short" if count < 2 else "too_long",
                        {"min_length": 2, "max_length": settings.max_choice_options, "actual_length": count},
                    )
                )
        elif isinstance(question, ScoreQuestion):
            count = len(question.criteria)
            if not 2 <= count <= settings.max_score_levels:
                issues.append(
                    Issue(
                        (*loc, "criteria"),
                        f"a score question needs 2 to {settings.max_score_levels} levels, got {count}",
                        "too_short" if count < 2 else "too_long",
                        {"min_length": 2, "max_length": settings.max_score_levels, "actual_length": count},
                    )
                )
    return issues
