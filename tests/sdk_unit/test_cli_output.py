"""The CLI's output formats, exit-code translation and value readers, without a server."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum

import click
import httpx
import pytest

from sdk.cli.batch import progress_line
from sdk.cli.errors import ExitCode, code_for_status, translate
from sdk.cli.history import decode_payloads, event_line, event_row
from sdk.cli.inputs import duration, json_inputs, key_values, upper_snake
from sdk.cli.output import Column, cell, format_record, format_rows, jsonable
from sdk.cli.schedule import readable
from sdk.converter import default_converter
from sdk.exceptions import ApplicationError, RPCError, WorkflowFailureError

ROWS = [
    {"workflow_id": "order-1", "run_id": "0195d0c2-aaaa-7bbb-8ccc-0123456789ab", "status": "Running"},
    {"workflow_id": "order-2", "run_id": "0195d0c2-dddd-7eee-8fff-0123456789ab", "status": "Completed"},
]
COLUMNS = [Column("Workflow ID", "workflow_id"), Column("Run ID", "run_id"), Column("Status", "status")]


class Color(Enum):
    RED = 1


@dataclass
class Point:
    x: int
    at: datetime


def test_table_has_headers_and_whole_ids_on_a_pipe() -> None:
    text = format_rows(ROWS, COLUMNS, "table", width=240)
    lines = text.splitlines()
    assert lines[0].split() == ["Workflow", "ID", "Run", "ID", "Status"]
    assert (
        "order-1" in lines[2] and "0195d0c2-aaaa-7bbb-8ccc-0123456789ab" in lines[2] and "Running" in lines[2]
    )
    assert "0195d0c2-dddd-7eee-8fff-0123456789ab" in lines[3] and lines[3].rstrip().endswith("Completed")
    assert "\x1b[" not in text, "no colour codes in a table written to a pipe"


def test_a_narrow_table_folds_cells_instead_of_cutting_them() -> None:
    lines = format_rows(ROWS, COLUMNS, "table", width=40).splitlines()
    assert not any("…" in line for line in lines)
    start, end = lines[0].index("Run ID"), lines[0].index("Status")
    first_row = lines[2 : lines.index(next(line for line in lines if line.startswith("order-2")))]
    assert "".join(line[start:end].strip() for line in first_row) == ROWS[0]["run_id"]


def test_json_and_jsonl() -> None:
    assert json.loads(format_rows(ROWS, COLUMNS, "json")) == ROWS
    assert [json.loads(line) for line in format_rows(ROWS, COLUMNS, "jsonl").splitlines()] == ROWS
    assert format_rows([], COLUMNS, "json").strip() == "[]"
    assert format_rows([], COLUMNS, "jsonl") == ""
    assert format_rows([], COLUMNS, "table") == "(none)\n"


def test_a_record_is_a_field_value_table_or_one_object() -> None:
    record = {"workflow_id": "order-1", "memo": {"note": "hi"}, "close_time": None, "attempt": 2}
    table = format_record(record, "table", width=120)
    assert table.splitlines()[0].split() == ["Field", "Value"]
    assert any(line.split() == ["memo", '{"note":"hi"}'] for line in table.splitlines())
    assert any(line.split() == ["close_time"] for line in table.splitlines())
    assert json.loads(format_record(record, "json")) == record
    assert format_record(record, "jsonl").count("\n") == 1


def test_jsonable_and_cells() -> None:
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    value = {
        "at": at,
        "wait": timedelta(minutes=2),
        "color": Color.RED,
        "raw": b"\x00\x01",
        "p": Point(1, at),
    }
    assert jsonable(value) == {
        "at": "2026-01-02T03:04:05+00:00",
        "wait": 120.0,
        "color": "RED",
        "raw": "AAE=",
        "p": {"x": 1, "at": "2026-01-02T03:04:05+00:00"},
    }
    assert cell(None) == "" and cell("text") == "text" and cell(True) == "true" and cell(3) == "3"
    assert cell(["a", 1]) == '["a",1]'


def test_status_codes_map_to_exit_codes() -> None:
    assert code_for_status(400) == ExitCode.USAGE
    assert code_for_status(401) == ExitCode.UNAUTHENTICATED
    assert code_for_status(403) == ExitCode.PERMISSION_DENIED
    assert code_for_status(404) == ExitCode.NOT_FOUND
    assert code_for_status(409) == ExitCode.ALREADY_EXISTS
    assert code_for_status(422) == ExitCode.FAILED
    assert code_for_status(503) == ExitCode.UNAVAILABLE
    assert code_for_status(429) == ExitCode.UNAVAILABLE


def test_exceptions_translate_to_a_message_and_a_code() -> None:
    missing = translate(RPCError("workflow 'x' not found", status=404, code="not_found"))
    assert missing is not None and missing.exit_code == 3
    assert missing.message == "not found: workflow 'x' not found [not_found]"

    failed = translate(WorkflowFailureError(cause=ApplicationError("card declined", type="Declined")))
    assert failed is not None and failed.exit_code == 1 and "card declined" in failed.message

    request = httpx.Request("GET", "http://127.0.0.1:9/api/v1/namespaces/default/workflows")
    down = translate(httpx.ConnectError("connection refused", request=request))
    assert down is not None and down.exit_code == 6
    assert "http://127.0.0.1:9/" in down.message and "connection refused" in down.message

    no_worker = translate(RPCError("no worker answered the query", status=504, code="deadline_exceeded"))
    assert no_worker is not None and no_worker.exit_code == 1 and no_worker.message.startswith("timed out")

    assert translate(KeyError("a bug")) is None, "a bug keeps its traceback"


def test_durations_inputs_and_pairs() -> None:
    assert duration("90") == timedelta(seconds=90)
    assert duration("1h30m") == timedelta(minutes=90)
    assert duration("250ms") == timedelta(milliseconds=250)
    assert duration("2d") == timedelta(days=2)
    for bad in ("", "5x", "m5", "1h 30m"):
        with pytest.raises(click.BadParameter):
            duration(bad)
    assert json_inputs(['{"a": 1}', "2", '"s"']) == [{"a": 1}, 2, "s"]
    with pytest.raises(click.BadParameter, match="not JSON"):
        json_inputs(["{oops"])
    assert key_values(["Amount=12", "Region=eu", 'Tags=["a"]'], "--x") == {
        "Amount": 12,
        "Region": "eu",
        "Tags": ["a"],
    }
    with pytest.raises(click.BadParameter, match="KEY=VALUE"):
        key_values(["novalue"], "--memo")
    assert upper_snake("BufferOne") == "BUFFER_ONE" and upper_snake("Skip") == "SKIP"


def test_events_read_with_their_payloads_decoded() -> None:
    event = {
        "event_id": 5,
        "event_time": "2026-01-02T03:04:05.123456+00:00",
        "event_type": "WorkflowExecutionSignaled",
        "attributes": {"signal_name": "add", "input": default_converter.to_payloads(["kiwi", {"n": 1}])},
    }
    row = event_row(event, default_converter)
    assert row["details"] == '{"input":["kiwi",{"n":1}],"signal_name":"add"}'
    assert row["time"] == "2026-01-02T03:04:05.123"
    line = event_line(row)
    assert line.split()[:3] == ["5", "2026-01-02T03:04:05.123", "WorkflowExecutionSignaled"]
    unknown = {"metadata": {"encoding": "x-unknown"}, "data": "???"}
    assert decode_payloads({"p": unknown}, default_converter) == {"p": unknown}
    long = {**event, "attributes": {"input": default_converter.to_payloads(["x" * 500])}}
    assert len(event_row(long, default_converter)["details"]) == 160


def test_batch_progress_line() -> None:
    job = {"job_id": "j1", "operation": "terminate", "total": 10, "done": 4, "failed": 1, "progress": 0.5}
    assert progress_line({**job, "state": "Running"}) == "job j1: terminate 4/10 done, 1 failed (50%) Running"


def test_a_schedule_description_reads_one_field_a_line() -> None:
    described = {
        "schedule_id": "nightly",
        "conflict_token": 3,
        "memo": {},
        "schedule": {
            "spec": {"cron_expressions": ["0 3 * * *"], "intervals": [{"every": 7200.0, "offset": 900.0}]},
            "action": {"workflow_type": "Report", "workflow_id": "nightly-report", "task_queue": "reports"},
            "policy": {"overlap": "SKIP"},
            "state": {"paused": True, "note": "maintenance", "limited_actions": False},
        },
        "info": {
            "num_actions": 2,
            "recent_actions": [{"workflow_id": "a"}, {"workflow_id": "b"}],
            "next_action_times": ["t1", "t2", "t3", "t4"],
        },
    }
    fields = readable(described)
    assert fields["cron"] == "0 3 * * *" and fields["intervals"] == "every 7200.0s offset 900.0s"
    assert fields["paused"] is True and fields["notes"] == "maintenance"
    assert fields["workflow_type"] == "Report" and fields["overlap_policy"] == "SKIP"
    assert fields["last_action"] == {"workflow_id": "b"} and fields["next_actions"] == ["t1", "t2", "t3"]
    assert fields["remaining_actions"] is None
    assert readable({"schedule_id": "x", "deleted": True}) == {"schedule_id": "x", "deleted": True}
