"""The error answers can always be written: json_safe by hand, and handlers whose content would break
FastAPI's defaults (a non-finite float, a lone surrogate, undecodable bytes) still answer their 4xx."""

from __future__ import annotations

import math

import pytest
from fastapi import FastAPI, HTTPException
from fastapi.exceptions import RequestValidationError
from fastapi.testclient import TestClient
from pydantic import BaseModel

from fleet_rl.env import EpisodeError
from fleet_rl.server.error_responses import install_error_handlers, json_safe


class Job(BaseModel):
    id: str


def test_json_safe_by_hand():
    assert json_safe({"a": [1, 2.5, True, None, "é"]}) == {"a": [1, 2.5, True, None, "é"]}
    assert json_safe([math.nan, math.inf, -math.inf]) == ["nan", "inf", "-inf"]
    assert json_safe("x\ud800y") == "x\\ud800y"
    assert json_safe({"\udfff": b"ok\xff"}) == {"\\udfff": "ok\\xff"}
    assert json_safe(("a", 1)) == ["a", 1]
    assert json_safe(ValueError("boom")) == {}  # jsonable_encoder's reading of an exception

    class Point(BaseModel):
        x: float

    assert json_safe(Point(x=math.nan)) == {"x": "nan"}


@pytest.fixture(scope="module")
def client():
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/http-error")
    def http_error():
        detail = [{"input": math.nan, "msg": "x\ud800"}]
        raise HTTPException(status_code=422, detail=detail, headers={"X-A": "1"})

    @app.get("/validation-error")
    def validation_error():
        error = {"type": "float_type", "loc": ("body",), "input": b"\xff", "msg": "bad"}
        raise RequestValidationError([error])

    @app.get("/episode-error")
    def episode_error():
        raise EpisodeError("unknown task '\ud800'")

    @app.post("/model")
    def model(payload: Job):
        return payload

    with TestClient(app, raise_server_exceptions=True) as client:
        yield client


def test_http_exception_keeps_status_and_headers(client):
    response = client.get("/http-error")
    assert response.status_code == 422 and response.headers["x-a"] == "1"
    assert response.json() == {"detail": [{"input": "nan", "msg": "x\\ud800"}]}


def test_request_validation_error_with_undecodable_bytes(client):
    response = client.get("/validation-error")
    assert response.status_code == 422
    assert response.json()["detail"][0]["input"] == "\\xff"


def test_episode_error_with_a_lone_surrogate(client):
    response = client.get("/episode-error")
    assert response.status_code == 400 and response.json() == {"detail": "unknown task '\\ud800'"}


def test_a_non_json_body_that_is_not_utf8_gets_422(client):
    response = client.post("/model", content=b"\xff\xfe", headers={"content-type": "text/plain"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["input"] == "\\xff\\xfe"


def test_not_found_and_wrong_method_keep_their_status(client):
    assert client.get("/nowhere").status_code == 404
    assert client.post("/episode-error").status_code == 405
