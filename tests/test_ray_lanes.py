"""Campaigns on a Ray cluster (issue 16): lanes as actors, the same cases, signatures and bugs as the local pool,
a lost actor's case re-queued, kill -9 of the driver losing nothing. The cluster (a head and one worker node on
this machine, one CPU each) is started by the fixture below and torn down by the processes it started."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from campaign_fixtures import fault_stream

from fuzzer.campaign import Campaign, CampaignConfig
from fuzzer.campaign.progress import Progress
from fuzzer.campaign.ray_lanes import (
    NEURON_RESOURCE,
    RAY_HINT,
    code_digest,
    code_root,
    lane_capacity,
    lane_count,
    lane_resources,
    minimizer_env,
    ray_missing,
)

ROOT = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------- pure logic (no Ray needed)


def test_lanes_request_neuron_cores_only_for_neuron_executors() -> None:
    assert lane_resources(["torch/eager", "xla/native"]) == {"num_cpus": 1}
    assert lane_resources(["xla/native", "neuron/auto-cast-none"]) == {"num_cpus": 1, "resources": {NEURON_RESOURCE: 1.0}}
    assert lane_resources(["neuron/auto-cast-all-bf16"], neuron_cores=2) == {"num_cpus": 1,
                                                                              "resources": {NEURON_RESOURCE: 2}}
    assert lane_resources(["tvm/neuronish"]) == {"num_cpus": 1}  # only the neuron/ family counts


def test_lane_capacity_and_count() -> None:
    cpu = lane_resources(["torch/eager"])
    neuron = lane_resources(["neuron/auto-cast-none"])
    trn2 = {"CPU": 192.0, NEURON_RESOURCE: 32.0, "memory": 1e12}
    assert lane_capacity(trn2, cpu) == 192 and lane_capacity(trn2, neuron) == 32
    assert lane_capacity({"CPU": 8.0}, neuron) == 0  # no NeuronCores: no Neuron lane fits
    assert lane_capacity(trn2, lane_resources(["neuron/auto-cast-none"], neuron_cores=3)) == 10
    assert (lane_count(0, 32), lane_count(4, 32), lane_count(64, 32)) == (32, 4, 32)


def test_minimizer_takes_the_neuron_core_the_driver_node_keeps() -> None:
    assert minimizer_env(["neuron/auto-cast-none"], 7.0) == {"NEURON_RT_VISIBLE_CORES": "7"}
    assert minimizer_env(["torch/eager"], 7.0) == {}
    assert minimizer_env(["neuron/auto-cast-none"], None) == {}


def test_head_endpoint_and_an_unreachable_head() -> None:
    from fuzzer.campaign.ray_lanes import head_endpoint, unreachable

    assert head_endpoint("10.0.0.5:6379") == ("10.0.0.5", 6379)
    assert head_endpoint("[::1]:6379") == ("::1", 6379)
    assert head_endpoint("auto") is None and head_endpoint("ray://head:10001") is None
    assert "cannot reach the Ray head at 127.0.0.1:1" in (unreachable("127.0.0.1:1") or "")


def test_ray_is_loaded_only_when_a_cluster_is_used() -> None:
    code = ("import sys, fuzzer.cli, fuzzer.campaign.ray_lanes\nfuzzer.cli.build_parser()\n"
            "print('ray' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.stdout.strip() == "False", done.stderr[-2000:]


def test_ray_flag_without_ray_says_how_to_install() -> None:
    code = ("import sys; sys.modules['ray'] = None\nfrom fuzzer.cli import main\n"
            "sys.exit(main(['run', '--out', sys.argv[1], '--ray', 'auto', '--executors', 'torch/eager']))")
    done = subprocess.run([sys.executable, "-c", code, "/nonexistent-precfuzz-out"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 2
    assert done.stderr == f"precfuzz: error: {RAY_HINT}\n" == "precfuzz: error: --ray needs Ray: pip install -e '.[ray]'\n"


# ---------------------------------------------------------------- on a local cluster

ray_reason = ray_missing()
needs_ray = pytest.mark.skipif(ray_reason is not None, reason=f"Ray is not installed ({ray_reason})")


@pytest.fixture(scope="module")
def cluster():
    """A Ray head and one worker node on this machine, one CPU each; removed (its own processes) at the end.

    The nodes keep the machine's own address: a driver connects to the raylet of its node's IP, so nodes
    pinned to 127.0.0.1 on a machine whose address is another one leave ray.init waiting.
    """
    from ray.cluster_utils import Cluster

    args = dict(num_cpus=1, include_dashboard=False, object_store_memory=80 * 2**20)
    c = Cluster(initialize_head=True, head_node_args=args)
    try:
        c.add_node(**args)
        yield c
    finally:
        c.shutdown()


def quiet() -> Progress:
    return Progress(stream=open(os.devnull, "w"), live=False)


def config(out: Path, **kw) -> CampaignConfig:
    base = dict(out=out, executors=["debug/faults"], seed=3, max_tests=21, workers=2, minimize=False,
                timeout_s=20.0, generate=fault_stream)
    base.update(kw)
    return CampaignConfig(**base)


def signatures(out: Path) -> dict[str, int]:
    return {r["signature"]: r["count"] for r in map(json.loads, (out / "findings.jsonl").read_text().splitlines())}


def bug_keys(out: Path) -> dict[str, int]:
    bugs = map(json.loads, (out / "bugs.jsonl").read_text().splitlines())
    return {b["key"]: b["count"] for b in bugs if not b.get("merged_into")}


def items(out: Path) -> list[str]:
    return sorted(pd.read_parquet(out / "runs.parquet")["item"], key=int)


def gone(pids: list[int], timeout_s: float = 60.0) -> bool:
    """True once none of `pids` runs (zombies count as gone)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(_running(p) for p in pids):
            return True
        time.sleep(0.5)
    return False


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@needs_ray
@pytest.mark.slow
def test_ray_lanes_find_what_local_lanes_find(cluster, tmp_path: Path) -> None:
    local, remote = tmp_path / "local", tmp_path / "ray"
    Campaign(config(local), quiet()).run()
    camp = Campaign(config(remote, ray=cluster.address, workers=0), quiet())
    info = dict(camp.lanes.info)
    summary = camp.run()
    assert (summary.cases, summary.tests, summary.stopped_by) == (21, 21, "max-tests")
    assert signatures(remote) == signatures(local) and len(signatures(local)) == 3
    assert bug_keys(remote) == bug_keys(local)
    assert items(remote) == items(local) == [str(i) for i in range(21)]
    # two lanes, one per node, both running the driver's code as shipped by Ray (not this checkout's path)
    assert len(info) == 2 and len({i["node"] for i in info.values()}) == 2
    assert all(i["digest"] == code_digest(code_root()) and i["code"] != str(ROOT) for i in info.values())
    assert all(i["worker_code"] == i["code"] for i in info.values())
    assert gone([i["pid"] for i in info.values()])  # run() ends its actors


@needs_ray
@pytest.mark.slow
def test_a_lost_actor_has_its_case_requeued_and_replaced(cluster, tmp_path: Path) -> None:
    camp = Campaign(config(tmp_path, ray=cluster.address, max_tests=30, workers=0), quiet())
    victim = camp.lanes.info[0]["pid"]

    def kill_mid_run() -> None:
        deadline = time.monotonic() + 120
        while camp.state.cases < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(victim, signal.SIGKILL)

    killer = threading.Thread(target=kill_mid_run, daemon=True)
    killer.start()
    summary = camp.run()
    killer.join()
    assert (summary.cases, summary.stopped_by) == (30, "max-tests")
    assert items(tmp_path) == [str(i) for i in range(30)]  # every case exactly once
    events = [json.loads(line) for line in (tmp_path / "lane-events.jsonl").read_text().splitlines()]
    assert [(e["lane"], e["event"], e["replaced"]) for e in events] == [(0, "lost", True)], events
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["pending"] == [] and state["next_index"] == 30
    expected = tmp_path / "local"
    Campaign(config(expected, max_tests=30, workers=1), quiet()).run()
    assert signatures(tmp_path) == signatures(expected)


DRIVER = """
import json, sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from campaign_fixtures import fault_stream
from fuzzer.campaign import Campaign, CampaignConfig
cfg = CampaignConfig(out=Path({out!r}), executors=["debug/faults"], seed=3, time_s=600, workers=0, minimize=False,
                     generate=fault_stream, flush_s=0.5, ray={address!r})
camp = Campaign(cfg)
print(json.dumps([i["pid"] for i in camp.lanes.info.values()]), flush=True)
camp.run()
"""


@needs_ray
@pytest.mark.slow
def test_kill_minus_9_of_a_ray_driver_loses_no_finding_and_resumes(cluster, tmp_path: Path) -> None:
    out = tmp_path / "camp"
    code = DRIVER.format(tests=str(Path(__file__).parent), out=str(out), address=cluster.address)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, cwd=ROOT)
    try:
        actors = json.loads(proc.stdout.readline() or "[]")
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            time.sleep(0.3)
            state = out / "state.json"
            if state.exists() and json.loads(state.read_text())["cases"] >= 16:
                break
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert len(actors) == 2
    assert gone(actors), "the killed driver's actors outlived it"
    before = signatures(out)
    state = json.loads((out / "state.json").read_text())
    assert len(before) == 3 and state["cases"] >= 16
    Campaign(config(out, ray=cluster.address, workers=0, max_tests=state["tests"] + 10), quiet()).run()
    after = signatures(out)
    assert all(s in after and after[s] >= n for s, n in before.items())
    resumed = json.loads((out / "state.json").read_text())
    assert resumed["next_index"] >= state["next_index"] and resumed["invocations"] == 2
    assert resumed["tests"] >= state["tests"] + 10 and resumed["pending"] == []


REAL = ["--executors", "torch/eager,tvm/default", "--seed", "1", "--max-tests", "40", "--no-seeds",
        "--no-minimize", "--workers", "2"]


@needs_ray
@pytest.mark.slow
def test_cli_ray_run_selects_the_same_cases_and_bugs_as_the_local_pool(cluster, tmp_path: Path) -> None:
    """The determinism contract on real backends: same seed and --max-tests, same cases, signatures and bugs."""
    outs = {}
    for mode, extra in (("local", []), ("ray", ["--ray", cluster.address])):
        outs[mode] = tmp_path / mode
        done = subprocess.run([sys.executable, "-m", "fuzzer.cli", "run", "--out", str(outs[mode]), *REAL, *extra],
                              capture_output=True, text=True, cwd=ROOT, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        assert json.loads(done.stdout.strip().splitlines()[-1])["stopped_by"] == "max-tests"
    local, remote = outs["local"], outs["ray"]
    assert "Ray lane(s)" in done.stderr
    runs = {m: pd.read_parquet(o / "runs.parquet") for m, o in outs.items()}
    assert sorted(set(runs["ray"]["case"])) == sorted(set(runs["local"]["case"]))
    assert len(runs["ray"]) == len(runs["local"]) <= 40
    assert set(signatures(remote)) == set(signatures(local)) and signatures(local)  # seed 1 finds two bugs
    assert set(bug_keys(remote)) == set(bug_keys(local))


# module-scoped fixtures (worker pools, a cluster) are built once: every test of this file on one xdist worker
pytestmark = pytest.mark.xdist_group(name="test_ray_lanes")
