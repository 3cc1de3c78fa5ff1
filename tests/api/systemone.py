"""Requests to `POST /v1/systemone` as the API tests build them, and reading a 422's locations."""


def post(http, body, **kwargs):
    return http.post("/v1/systemone", json=body, **kwargs)


def request_with(questions, state="The printer on floor 3 is on fire.", model="jev-latest"):
    return {"model": model, "state": state, "questions": questions}


def loc_of(response):
    assert response.status_code == 422, response.text
    return [entry["loc"] for entry in response.json()["detail"]]


NOUL = {"type": "noul", "instructions": "Is this an emergency?"}
CHOICE = {"type": "choice", "instructions": "Who handles it?", "criteria": {"facilities": None, "it": "Computers"}}
SCORE = {"type": "score", "instructions": "How bad?", "criteria": ["minor", "serious", "critical"]}
