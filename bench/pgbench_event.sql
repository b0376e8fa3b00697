-- One "append an event" transaction, shaped like Chronicle's hot path:
-- bump the execution's next_event_id and insert one history row.
-- Tables are created by bench/run_bench.py (bench_exec has 1000 rows).
\set rid random(1, 1000)
BEGIN;
UPDATE bench_exec SET next_event_id = next_event_id + 1 WHERE run_id = :rid;
INSERT INTO bench_event (run_id, event_id, event_type, event_time, attributes)
VALUES (gen_random_uuid(), :rid, 'WorkflowExecutionSignaled', now(), '{"signal_name": "s", "input": []}');
END;
