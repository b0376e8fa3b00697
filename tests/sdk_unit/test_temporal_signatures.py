"""Temporal's names that configure what Chronicle has no counterpart for: accepted, honest, and
strict about misspellings; plus the small value types ported code reads."""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import sys
import types

import pytest

from sdk import activity, workflow
from sdk._async_activity import split_task_token, task_token_for
from sdk._failure import exception_to_failure, failure_to_exception
from sdk.api.failure.v1 import Failure
from sdk.client import Client
from sdk.exceptions import ApplicationError, ApplicationErrorCategory, RestrictedWorkflowAccessError
from sdk.runtime import PrometheusConfig, Runtime, TelemetryConfig
from sdk.worker import SandboxedWorkflowRunner, UnsandboxedWorkflowRunner, Worker
from sdk.worker.workflow_sandbox import SandboxRestrictions


@workflow.defn
class Nothing:
    @workflow.run
    async def run(self) -> None:
        return None


def _client() -> Client:
    return asyncio.run(Client.connect("http://127.0.0.1:1", namespace="ns", api_key="k"))


def test_worker_accepts_temporals_options_and_refuses_misspellings() -> None:
    client = _client()
    restrictions = SandboxRestrictions.default.with_passthrough_modules(
        "pydantic"
    ).with_passthrough_all_modules()
    assert restrictions.passthrough_modules == {"pydantic"} and restrictions.passthrough_all_modules
    worker = Worker(
        client,
        task_queue="q",
        workflows=[Nothing],
        workflow_runner=SandboxedWorkflowRunner(restrictions=restrictions),
        unsandboxed_workflow_runner=UnsandboxedWorkflowRunner(),
        interceptors=[],
        debug_mode=True,
    )
    assert worker.determinism_guard  # the runner is not what turns the guard off
    with pytest.raises(TypeError, match="max_concurrent_activites"):
        Worker(client, task_queue="q", workflows=[Nothing], max_concurrent_activites=3)


def test_connect_accepts_grpc_options_and_refuses_misspellings() -> None:
    runtime = Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address="0.0.0.0:9000")))

    async def connect() -> Client:
        return await Client.connect(
            "http://127.0.0.1:1", namespace="ns", api_key="k", runtime=runtime, lazy=True, rpc_metadata={}
        )

    assert asyncio.run(connect()).namespace == "ns"
    with pytest.raises(TypeError, match="namepsace"):
        asyncio.run(Client.connect("http://127.0.0.1:1", namepsace="ns"))
    Runtime.set_default(runtime, error_if_already_set=False)
    assert Runtime.default() is runtime


def test_pydantic_converter_says_what_to_install_when_pydantic_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pydantic", None)
    monkeypatch.delitem(sys.modules, "sdk.contrib.pydantic", raising=False)
    with pytest.raises(ImportError, match="install pydantic"):
        importlib.import_module("sdk.contrib.pydantic")


def test_pydantic_converter_puts_pydantic_in_place_of_plain_json(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a stand-in for pydantic's two entry points, the converter routes JSON through them."""
    calls: list[str] = []

    class TypeAdapter:
        def __init__(self, hint: object) -> None:
            self.hint = hint

        def validate_json(self, data: bytes) -> object:
            calls.append(f"validate {self.hint}")
            return json.loads(data)

    def to_json(value: object) -> bytes:
        calls.append("dump")
        return json.dumps(value).encode()

    monkeypatch.setitem(sys.modules, "pydantic", types.SimpleNamespace(TypeAdapter=TypeAdapter))
    monkeypatch.setitem(sys.modules, "pydantic_core", types.SimpleNamespace(to_json=to_json))
    monkeypatch.delitem(sys.modules, "sdk.contrib.pydantic", raising=False)
    converter = importlib.import_module("sdk.contrib.pydantic").pydantic_data_converter
    wire = converter.to_payload({"a": 1})
    assert wire == {"metadata": {"encoding": "json/plain"}, "data": {"a": 1}}
    assert converter.from_payload(wire, dict) == {"a": 1}
    assert converter.to_payload(None)["metadata"]["encoding"] == "binary/null"  # the chain is kept
    assert calls == ["dump", "validate <class 'dict'>"]
    monkeypatch.delitem(sys.modules, "sdk.contrib.pydantic")


def test_failure_reads_as_temporals_message_and_as_the_dict() -> None:
    try:
        try:
            raise ValueError("inner")
        except ValueError as inner:
            raise ApplicationError("outer", type="Bad", category=ApplicationErrorCategory.BENIGN) from inner
    except ApplicationError as exc:
        wire = exception_to_failure(exc)
    error = failure_to_exception(wire)
    assert isinstance(error, ApplicationError) and error.category is ApplicationErrorCategory.BENIGN
    failure = error.failure
    assert isinstance(failure, Failure)
    assert failure.message == "outer" and "raise ApplicationError" in failure.stack_trace
    assert failure["message"] == "outer" and failure.HasField("application_failure_info")
    assert failure.application_failure_info["type"] == "Bad"
    assert failure.cause is not None and failure.cause.message == "inner"
    assert (
        str(error) == "Bad: outer" and error.message == "outer" and str(ApplicationError("plain")) == "plain"
    )
    # Passed on (an activity's failure inside the run's), it keeps where it was first raised.
    again = exception_to_failure(error)
    assert again["message"] == "outer" and again["stack_trace"] == wire["stack_trace"]


def test_task_token_carries_its_queue() -> None:
    assert split_task_token(task_token_for("orders", "abc.def")) == ("orders", "abc.def")
    with pytest.raises(ValueError, match="task token"):
        split_task_token(b"no-queue")


def test_a_class_is_refused_as_an_activity_and_a_bound_method_is_bound() -> None:
    class Service:
        @activity.defn
        def work(self) -> str:
            return "worked"

    with pytest.raises(TypeError, match="class instead of an instance"):
        activity.definition_of(Service)
    bound = activity.definition_of(Service().work)
    assert bound.fn() == "worked" and bound.name == "work"


def test_logger_adapters_take_temporals_switch_names(caplog: pytest.LogCaptureFixture) -> None:
    activity.logger.activity_info_on_message = False
    workflow.logger.workflow_info_on_extra = False
    try:
        assert not activity.logger.info_on_message and not workflow.logger.info_on_extra
    finally:
        activity.logger.activity_info_on_message = True
        workflow.logger.workflow_info_on_extra = True
    with caplog.at_level(logging.INFO, logger="sdk.activity"):
        activity.logger.info("outside an activity")
    assert caplog.records[0].getMessage() == "outside an activity"


def test_restricted_access_is_a_nondeterminism_error() -> None:
    assert issubclass(RestrictedWorkflowAccessError, workflow.NondeterminismError)
