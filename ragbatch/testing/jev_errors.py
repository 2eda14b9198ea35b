"""Request validation and error bodies of the loopback Jev server (pure: no I/O).

The shapes are the reference's (jevcompat spec §6): a 422 carries FastAPI-style
``{"detail": [{"type", "loc", "msg"}]}``, every other error ``{"detail": {"error_type",
"message"}}``.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

QUESTION_TYPES = frozenset({"noul", "choice", "score"})
JSON_INVALID = {"type": "json_invalid", "loc": ["body"], "msg": "JSON decode error"}


def validation_errors(body: Any) -> list[dict[str, Any]]:
    """FastAPI-style ``detail`` entries for a body that is not a valid request."""

    def err(kind: str, loc: list[Any], msg: str) -> dict[str, Any]:
        return {"type": kind, "loc": ["body", *loc], "msg": msg}

    if not isinstance(body, dict):
        return [err("dict_type", [], "Input should be a valid dictionary")]
    fields = ("model", "state", "questions")
    missing = [err("missing", [f], "Field required") for f in fields if f not in body]
    if missing or not isinstance(body["model"], str):
        return missing or [err("string_type", ["model"], "Input should be a valid string")]
    if not isinstance(body["questions"], dict) or not body["questions"]:
        return [err("dict_type", ["questions"], "Input should be a non-empty dictionary")]
    errors = []
    for qid, q in body["questions"].items():
        if not isinstance(q, dict) or q.get("type") not in QUESTION_TYPES:
            errors.append(err("union_tag_invalid", ["questions", qid], "type: noul|choice|score"))
        elif q["type"] == "choice" and (
            not isinstance(q.get("criteria"), dict) or len(q["criteria"]) < 2
        ):
            errors.append(
                err("too_short", ["questions", qid, "choice", "criteria"], "needs 2+ options")
            )
        elif q["type"] == "score" and (
            not isinstance(q.get("criteria"), list) or len(q["criteria"]) < 2
        ):
            loc = ["questions", qid, "score", "criteria"]
            errors.append(err("list_type", loc, "needs a list of 2+ levels"))
        elif q["type"] == "score" and any(v is None for v in q["criteria"]):
            # a null level would come back as a null legend value, which the SDK rejects
            loc = ["questions", qid, "score", "criteria"]
            errors.append(err("string_type", loc, "a level must be text, not null"))
    return errors


ERROR_TYPES = {
    400: "api_usage_error",
    401: "authentication_error",
    403: "authentication_error",
    404: "not_found",
    408: "timeout_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def error_type(status: int) -> str:
    return ERROR_TYPES.get(status, "internal_error" if status >= 500 else "api_error")


def phrase(status: int) -> str:
    if status == 529:
        return "overloaded"
    try:
        return HTTPStatus(status).phrase.lower()
    except ValueError:
        return "error"
