"""Request checks that depend on settings, each an `Issue` naming the offending field.

Pydantic already enforced the static shape (types, required fields, non-empty ids). These checks
add the limits an operator configures and the semantic rules of the contract. All of them run
before any tokenization or backend work; the HTTP layer reports them like FastAPI's own 422s.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import orjson

from openjev.config import Settings
from openjev.errors import Issue, Loc
from openjev.request.assets import strings_in
from openjev.request.schema import BoxQuestion, ChoiceQuestion, NoulQuestion, ScoreQuestion, SystemOneRequest
from openjev.request.worked_examples import question_issues


def _present(value: Any) -> bool:
    return value is not None and value != ""


# JSON's \ud800-style escapes can produce lone surrogates, which no tokenizer (nor UTF-8) can take.
_SURROGATE = re.compile("[\ud800-\udfff]")
#: Arrays and objects nested inside one another, at most, in the state and in each question's
#: instructions and criteria: orjson writes no deeper (so a value it encodes is within it, at no
#: cost), and every walk of a value (quoting, image marks, the chat template's `tojson`) stays far
#: inside Python's recursion limit.
MAX_DEPTH = 254
#: Keys of a too-deep value's path named in its issue (the path itself may be MAX_DEPTH long).
_DEPTH_LOC = 6
_SURROGATE_TEXT = "text must be valid Unicode: it holds a lone UTF-16 surrogate"


def _walk_issues(value: Any, loc: Loc) -> Iterator[Issue]:
    """An issue for every string (dict keys included) holding a lone UTF-16 surrogate, and one for a
    value nested deeper than MAX_DEPTH (its path named up to `_DEPTH_LOC` keys); iterative, so a deep
    value costs no recursion."""
    pending: list[tuple[Any, Loc, int]] = [(value, loc, 0)]
    too_deep = False
    while pending:
        item, where, depth = pending.pop()
        if isinstance(item, str):
            if not item.isascii() and _SURROGATE.search(item):
                yield Issue(where, _SURROGATE_TEXT, "string_unicode")
            continue
        if not isinstance(item, dict | list):
            continue
        if depth >= MAX_DEPTH:
            if not too_deep:
                too_deep = True
                message = f"arrays and objects may nest at most {MAX_DEPTH} levels deep; this value nests deeper"
                yield Issue(where[: len(loc) + _DEPTH_LOC], message, "too_deep", {"max_depth": MAX_DEPTH})
            continue
        if isinstance(item, list):
            pending.extend((child, (*where, index), depth + 1) for index, child in reversed(list(enumerate(item))))
            continue
        children = []
        for key, child in item.items():
            if _SURROGATE.search(key):
                # The key cannot be named in `loc`: a response cannot carry it either.
                yield Issue(where, "a key holds a lone UTF-16 surrogate; text must be valid Unicode", "string_unicode")
            else:
                children.append((child, (*where, key), depth + 1))
        pending.extend(reversed(children))


def _walked_issues(value: Any, loc: Loc) -> list[Issue]:
    """`_walk_issues`, walked only where there can be one: orjson refuses to encode a string (or key)
    holding a lone surrogate and a value nested deeper than MAX_DEPTH, so a value it encodes has
    neither (about 0.1 ms for 100 KB of chat against 8 ms for the walk). It refuses other things
    too (huge integers); the walk then decides."""
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        return list(_walk_issues(value, loc))
    return []


def _count_issues(loc: Loc, count: int, most: int, unit: str, setting: str) -> list[Issue]:
    """A question's criteria count outside [1, most], named at its criteria (the official schema's least is
    one: its one option or level is answered with probability 1, `answers.py`), in the words clients and
    routers look for ("1 to 64 levels per score, got 65")."""
    if 1 <= count <= most:
        return []
    return [
        Issue(
            (*loc, "criteria"),
            f"1 to {most} {unit}, got {count}" + (f" ({setting})" if count > most else ""),
            "too_short" if count < 1 else "too_long",
            {"min_length": 1, "max_length": most, "actual_length": count},
        )
    ]


def _box_issue(loc: Loc, question: BoxQuestion, request: SystemOneRequest, boxes: bool) -> Issue | None:
    """A box locates in the request's one image, which the state or the box's instructions show:
    refused where the model reads text only (`boxes` False), and where there is no image, or several,
    or the only one is shown elsewhere (the box's generation would not see it)."""
    if not boxes:
        return Issue(
            (*loc, "type"), "box questions need a vision model; this deployment reads text only", "unsupported"
        )
    assets = list(request.assets or {})
    if len(assets) != 1:
        message = f"a box question locates what it describes in the request's one image; it has {len(assets)}"
        return Issue(loc, message, "box_image_count", {"images": len(assets)})
    places = [*strings_in(request.state), *strings_in(question.instructions)]
    if any(assets[0] in text for text in places):
        return None
    return Issue(loc, "a box question locates in the image of the state or of its own instructions", "box_image")


def check_request(request: SystemOneRequest, settings: Settings, boxes: bool = False) -> list[Issue]:
    """`boxes`: the deployment answers box questions (a vision model whose tokenizer writes the box format)."""
    issues: list[Issue] = _walked_issues(request.state, ("state",))
    if len(request.questions) > settings.max_questions:
        issues.append(
            Issue(
                ("questions",),
                f"1 to {settings.max_questions} questions per request, got {len(request.questions)} "
                "(OPENJEV_MAX_QUESTIONS)",
                "too_long",
                {"max_length": settings.max_questions, "actual_length": len(request.questions)},
            )
        )
    for question_id, question in request.questions.items():
        if _SURROGATE.search(question_id):
            issues.append(Issue(("questions",), "a question id holds a lone UTF-16 surrogate", "string_unicode"))
            continue
        loc = ("questions", question_id)
        issues += _walked_issues(question.model_dump(include={"instructions", "criteria"}), loc)
        if isinstance(question, BoxQuestion):
            issues += filter(None, [_box_issue(loc, question, request, boxes)])
        elif isinstance(question, NoulQuestion):
            criteria = question.criteria
            described = criteria is not None and (_present(criteria.true) or _present(criteria.false))
            if not _present(question.instructions) and not described:
                issues.append(Issue(loc, "a noul question needs instructions or a described true/false outcome"))
        elif isinstance(question, ChoiceQuestion):
            most = settings.max_choice_options
            issues += _count_issues(
                loc, len(question.criteria), most, "options per choice", "OPENJEV_MAX_CHOICE_OPTIONS"
            )
        elif isinstance(question, ScoreQuestion):
            most = settings.max_score_levels
            issues += _count_issues(loc, len(question.criteria), most, "levels per score", "OPENJEV_MAX_SCORE_LEVELS")
        if not isinstance(question, BoxQuestion):
            issues += question_issues(question, loc, settings.max_examples_per_option, settings.max_example_bytes)
    return issues
