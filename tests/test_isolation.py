"""Isolation: crashes, hangs and errors in a backend become outcomes, and the worker comes back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from fuzzer.campaign.lanes import LocalLanes
from fuzzer.check import Checker
from fuzzer.ir import Case, Graph, Input, Node, input_values
from fuzzer.isolation import ExecutorPool, covered_seconds


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


def test_the_union_of_load_spans_counts_overlapping_loads_once() -> None:
    assert covered_seconds([]) == 0.0
    assert covered_seconds([(5.0, 6.0), (0.0, 2.0), (1.0, 3.0), (1.5, 2.5)]) == 4.0


def test_a_pools_backend_load_is_measured_at_each_worker_start() -> None:
    """make bench separates the workers' backend loads from precfuzz's own time (issue 21): each start, the first
    and every recycling, leaves one span from spawn to its warm-up's answer, inside the wall time around it."""
    t0 = time.monotonic()
    with ExecutorPool(["debug/faults"], timeout=5.0, max_calls=2) as pool:
        for _ in range(5):
            assert run(pool, 0.0).status == "ok"
        wall = time.monotonic() - t0
        (worker,) = pool.workers.values()
        assert len(worker.loads) == 3  # calls 1, 3 and 5 start a worker
        assert all(t0 <= a < b <= t0 + wall for a, b in worker.loads)
        assert 0.0 < pool.load_seconds() <= wall


def test_a_campaign_lane_starts_its_workers_loading_side_by_side(tmp_path: Path) -> None:
    """Issue 21: a lane's workers loaded one after the other as the first case reached each executor (the bench's
    first case took 20 s, 19 of them loads); a lane now primes every worker when it opens."""
    names = ["debug/faults", "torch/eager", "reference"]
    lane = LocalLanes(1, names, 60.0, 400, tmp_path, lambda k: {}).open(0)
    try:
        assert lane.alive() == 2  # spawned before any case: the faults worker and the torch worker
        assert sum(w.pending for w in lane.pool.workers.values()) == 2
        result = lane.check(fault_case(0.0))
        assert result.outcomes["torch/eager"][0].status == "ok"
        assert lane.load_s() > 0.0
    finally:
        lane.close()


def test_regression_an_audit_gives_each_tvm_pipeline_a_worker_of_its_own() -> None:
    """Issue 22: the three TVM pipelines compiled mobilenet_v3_small one after the other in one worker (74 s of a
    79 s check) while the other core idled; an audit's pool runs each in a process of its own."""
    from fuzzer.commands.audit import AUDIT_OWN_WORKER

    names = ["torch/eager", "torch/autocast", "tvm/default", "tvm/decompose", "reference"]
    with ExecutorPool(names, own_worker=AUDIT_OWN_WORKER) as pool:
        assert sorted(map(sorted, pool.groups(names))) == [
            ["reference"], ["torch/autocast", "torch/eager"], ["tvm/decompose"], ["tvm/default"]]
    with ExecutorPool(names) as shared:  # a campaign's lanes keep one TVM worker and its program cache
        assert ["tvm/default", "tvm/decompose"] in shared.groups(names)


def test_closing_a_pool_that_is_still_loading_kills_its_workers() -> None:
    """An audit primes its pool before the model is exported; when the export fails, the workers still importing
    their backends are killed, not waited for (they would read the exit request only after loading)."""
    pool = ExecutorPool(["torch/eager"])
    pool.prime()
    (worker,) = pool.workers.values()
    proc = worker.proc
    pool.close()
    assert proc is not None and proc.returncode == -signal.SIGKILL and worker.proc is None


ORPHAN = """
import sys
sys.path.insert(0, ".")
sys.path.insert(0, "tests")
from test_isolation import fault_case
from fuzzer.ir import input_values
from fuzzer.isolation import ExecutorPool
pool = ExecutorPool(["debug/faults"], timeout=600)
ok = fault_case(0.0)
pool.run("debug/faults", ok.graph, [input_values(ok, 0)])
(worker,) = pool.workers.values()
print(worker.proc.pid, flush=True)
hang = fault_case(2.0)
pool.run("debug/faults", hang.graph, [input_values(hang, 0)])
"""


def _alive(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_worker_hung_in_a_backend_call_dies_with_its_killed_parent() -> None:
    root = Path(__file__).resolve().parent.parent
    parent = subprocess.Popen([sys.executable, "-c", ORPHAN], cwd=root, stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    time.sleep(1.0)  # the worker is now sleeping inside the "hang" fault
    assert _alive(worker)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 5
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(worker):
        os.kill(worker, signal.SIGKILL)
        pytest.fail("the worker outlived its parent")


def test_workers_started_from_a_thread_that_ended_stay_up(pool) -> None:
    import threading

    t = threading.Thread(target=run, args=(pool, 0.0))
    t.start()
    t.join()
    time.sleep(0.5)  # a parent-death signal bound to the ended thread would have killed the worker by now
    assert run(pool, 0.0).status == "ok" and pool.restarts() == 0


def test_each_worker_logs_to_a_file_of_its_own(tmp_path: Path) -> None:
    with ExecutorPool(["xla/native", "xla/legacy-bf16"], log_dir=tmp_path) as a, \
            ExecutorPool(["xla/native"], log_dir=tmp_path) as b:
        workers = list(a.workers.values()) + list(b.workers.values())
        for w in workers:
            w.start()
        paths = [w._log_path for w in workers]
        assert len(workers) == 3 and len(set(paths)) == 3 and all(p.parent == tmp_path for p in paths)
        workers[0].kill()
        workers[0].start()  # a restart keeps its own file
        assert workers[0]._log_path == paths[0]


def test_regression_a_worker_start_up_is_not_a_timeout_of_the_case() -> None:
    """Adversarial #92: `check --timeout 5` reported a trivial 64-element layer_norm on torch/eager as a timeout on a
    loaded machine: the per-call clock also ran while the fresh worker imported torch (about 6 s there). Start-up now
    has a clock of its own; here a 1 s timeout is far below torch's import."""
    graph = Graph((Input("x", (64,), "float32"),), (Node("y", "layer_norm", ("x",), {"normalized_shape": [64]}),), ("y",))
    with ExecutorPool(["torch/eager"], timeout=1.0) as pool:
        (out,) = pool.run("torch/eager", graph, [{"x": np.linspace(-1.0, 1.0, 64)}])
        assert out.status == "ok", out.summary()


def test_check_side_by_side_runs_each_worker_group_in_a_thread_with_the_same_verdicts() -> None:
    """`precfuzz check` and `audit` run each worker process's executors in a thread of their own: the groups split
    by worker, and the outcomes and findings are those of the one-after-the-other run."""
    names = ["debug/faults", "torch/eager", "torch/autocast", "reference"]
    with ExecutorPool(names, timeout=120.0) as pool:
        groups = pool.groups(names)
        assert sorted(map(sorted, groups)) == [["debug/faults"], ["reference"], ["torch/autocast", "torch/eager"]]
        case = fault_case(5.0)
        one, two = Checker(pool).check(case), Checker(pool, side_by_side=True).check(case)
    assert sorted(f.signature for f in one.findings) == sorted(f.signature for f in two.findings) != []
    assert {n: [o.status for o in v] for n, v in one.outcomes.items()} == \
        {n: [o.status for o in v] for n, v in two.outcomes.items()}


def test_regression_a_graph_without_inputs_renders_a_device_for_its_constants() -> None:
    """triage13 b384310a99: minimizing left `full` alone, with no input to take the device from; the rendered function
    named an undefined `device` (NameError in precfuzz's own code), filed as a tvm/frontend bug."""
    from fuzzer.executors import create
    from fuzzer.ir import load_case

    case = load_case(Path(__file__).parent / "fixtures" / "full-without-inputs-b384310a99.json")
    for name in ("torch/eager", "tvm/frontend"):
        (out,) = create(name).run_case(case.graph, [{}])
        assert out.ok, (name, out.summary())
