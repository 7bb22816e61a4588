"""Isolation: crashes, hangs and errors in a backend become outcomes, and the worker comes back."""

from __future__ import annotations

import signal

import pytest

from fuzzer.check import Checker
from fuzzer.ir import Case, Graph, Input, Node, input_values
from fuzzer.isolation import ExecutorPool


def fault_case(fault: float) -> Case:
    x = Input("x", (3,), "float32", init={"values": [1.0, 2.0, 3.0]})
    f = Input("fault", (1,), "float32", init={"dist": "constant", "value": fault})
    graph = Graph((x, f), (Node("y", "mul", ("x", "fault")),), ("y",))
    return Case(graph)


@pytest.fixture()
def pool():
    with ExecutorPool(["debug/faults"], timeout=5.0) as p:
        yield p


def run(pool: ExecutorPool, fault: float):
    case = fault_case(fault)
    return pool.run("debug/faults", case.graph, [input_values(case, 0)])[0]


def test_segfault_becomes_crash_outcome_and_worker_restarts(pool) -> None:
    out = run(pool, 1.0)
    assert out.status == "crash" and out.signal == signal.SIGSEGV
    assert run(pool, 0.0).status == "ok"
    assert pool.restarts() >= 1


def test_hang_becomes_timeout_and_worker_restarts(pool) -> None:
    out = run(pool, 2.0)
    assert out.status == "timeout" and out.seconds == 5.0
    assert run(pool, 0.0).status == "ok"


def test_exception_is_an_error_value_and_the_worker_survives(pool) -> None:
    out = run(pool, 3.0)
    assert (out.status, out.stage, out.error_type, out.message) == ("error", "run", "RuntimeError", "injected failure")
    assert pool.restarts() == 0


def test_plain_exit_is_a_crash_without_signal(pool) -> None:
    out = run(pool, 4.0)
    assert out.status == "crash" and out.signal is None and "status 3" in out.message


def test_checker_turns_faults_into_findings(pool) -> None:
    checker = Checker(pool)
    wrong = checker.check(fault_case(5.0))
    assert [f.oracle for f in wrong.findings] == ["error-bound"]
    crashed = checker.check(fault_case(1.0))
    assert [(f.oracle, f.error_class) for f in crashed.findings] == [("crash", "signal-11")]
    clean = checker.check(fault_case(0.0))
    assert clean.findings == []


def test_worker_recycles_after_max_calls() -> None:
    with ExecutorPool(["debug/faults"], timeout=5.0, max_calls=2) as pool:
        for _ in range(5):
            assert run(pool, 0.0).status == "ok"
        assert pool.restarts() == 0  # recycling is a clean stop, not a failure
        (worker,) = pool.workers.values()
        assert worker.calls == 1
