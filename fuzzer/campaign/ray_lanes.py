"""Lanes as Ray actors: one campaign across the machines of a Ray cluster (`precfuzz run --ray ADDRESS`).

Each lane is an actor holding its own warm backend workers (fuzzer.isolation) and a Checker; it requests
`neuron_cores` when a neuron/* executor is selected (Ray then sets NEURON_RT_VISIBLE_CORES for it and its
workers), one CPU otherwise. The driver stays the single source of truth: it hands out cases in order,
receives each case's CheckResult and does dedup, store, state and minimizing itself (fuzzer.campaign.runner).
The actors import the driver's own code: fuzzer, generators and oracles are shipped as Ray `py_modules`.
A lost actor raises LaneLost for its case (which the driver re-queues) and is replaced a bounded number of
times. Actors are not detached: when the driver dies, Ray ends them with its job.
Ray is imported only when a cluster is used; without it the rest of precfuzz never loads it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any, Callable

from oracles.vocabulary import ExecutorName

from ..check import Checker, CheckResult
from ..executors import create
from ..ir import Case
from ..isolation import ExecutorPool
from .lanes import LaneLost, RemoteCheckError

RAY_HINT = "--ray needs Ray: pip install -e '.[ray]'"
NEURON_RESOURCE = "neuron_cores"  # Ray's resource name for AWS NeuronCores
READY_TIMEOUT_S = 300.0  # an actor that is not scheduled and ready by then is a cluster without room
MAX_REPLACEMENTS = 3  # per lane: a lane whose actor is lost more often than this ends
PACKAGES = ("fuzzer", "generators", "oracles")  # what actors import, shipped from the driver's checkout
SHIP_EXCLUDES = (".git", ".venv", "venv", "results", "build", "*.egg-info", ".hypothesis", ".pytest_cache",
                 "__pycache__")  # besides what .gitignore leaves out


class LaneError(Exception):
    """Ray lanes that cannot start (no Ray, no cluster, no room, an executor missing on a node)."""


def ray_missing() -> str | None:
    """None when Ray can be imported, else the one-line hint to install it."""
    return None if importlib.util.find_spec("ray") is not None else RAY_HINT


def uses_neuron(executors: list[str]) -> bool:
    """True when an executor runs on NeuronCores."""
    return any(ExecutorName.parse(n).family == "neuron" for n in executors)


def lane_resources(executors: list[str], neuron_cores: float = 1.0) -> dict[str, Any]:
    """Ray actor options of one lane: `neuron_cores` (and a CPU for the oracles) on Neuron, else one CPU."""
    if uses_neuron(executors) and neuron_cores > 0:
        return {"num_cpus": 1, "resources": {NEURON_RESOURCE: neuron_cores}}
    return {"num_cpus": 1}


def requested(options: dict[str, Any]) -> dict[str, float]:
    """The resources one lane holds, by Ray's names."""
    need = {"CPU": float(options.get("num_cpus", 0))}
    need.update({k: float(v) for k, v in options.get("resources", {}).items()})
    return {k: v for k, v in need.items() if v > 0}


def lane_capacity(total: dict[str, float], options: dict[str, Any]) -> int:
    """How many lanes a cluster with `total` resources holds at once."""
    need = requested(options)
    if not need:
        return 0
    return min(int(math.floor(total.get(k, 0.0) / v + 1e-9)) for k, v in need.items())


def lane_count(wanted: int, capacity: int) -> int:
    """Lanes to start: `wanted` (0: as many as fit), never more than fit."""
    return capacity if wanted <= 0 else min(wanted, capacity)


def minimizer_env(executors: list[str], driver_cores: float | None) -> dict[str, str]:
    """The driver-side minimizer's NeuronCore: the first one its node does not advertise to Ray."""
    if not uses_neuron(executors) or driver_cores is None:
        return {}
    return {"NEURON_RT_VISIBLE_CORES": str(int(driver_cores))}


def code_root() -> Path:
    """The checkout this process imports precfuzz from."""
    return Path(__file__).resolve().parents[2]


def code_env(root: Path | None = None) -> dict[str, Any]:
    """Ray job runtime_env shipping the driver's checkout to every actor: their working directory, first on the
    PYTHONPATH of the actors and of the backend workers they start (results, venvs and git data left out)."""
    return {"working_dir": str(root or code_root()), "excludes": list(SHIP_EXCLUDES)}


def code_digest(root: Path) -> str:
    """A hash of the Python sources of the packages lanes run, to prove an actor runs the driver's code."""
    h = hashlib.sha256()
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def describe_needs(options: dict[str, Any]) -> str:
    """'1 CPU' or '1 CPU + 1 neuron_cores', for messages."""
    return " + ".join(f"{v:g} {k}" for k, v in requested(options).items())


# ---------------------------------------------------------------- the actor (runs on a cluster node)


class LaneWorker:
    """The body of one lane's actor: a Checker on a pool of warm workers on its node."""

    def __init__(self, executors: list[str], timeout_s: float, max_calls: int, log_name: str) -> None:
        self.executors = list(executors)
        log_dir = Path(tempfile.gettempdir()) / "precfuzz-ray" / log_name
        self.pool = ExecutorPool(self.executors, timeout=timeout_s, max_calls=max_calls, log_dir=log_dir)
        self.pool.prime()  # the workers load side by side while the driver checks ready()
        self.checker = Checker(self.pool)

    def ready(self) -> dict[str, Any]:
        """Where this lane runs and which of its executors this node lacks (name -> why)."""
        import fuzzer

        missing = {n: why for n in self.executors if (why := create(n).availability()) is not None}
        root = Path(fuzzer.__file__).resolve().parents[1]
        probe = subprocess.run([sys.executable, "-c", "import fuzzer; print(fuzzer.__file__)"], capture_output=True,
                               text=True, env=dict(os.environ), timeout=120)  # as fuzzer.isolation starts workers
        workers = str(Path(probe.stdout.strip()).resolve().parents[1]) if probe.returncode == 0 else probe.stderr[-300:]
        import ray

        return {"host": socket.gethostname(), "pid": os.getpid(), "node": ray.get_runtime_context().get_node_id(),
                "code": str(root), "digest": code_digest(root),
                "worker_code": workers,
                "cores": os.environ.get("NEURON_RT_VISIBLE_CORES", ""), "unavailable": missing}

    def check(self, case: Case, executors: list[str] | None = None) -> tuple[str, Any, str, int, int, float]:
        """('ok', result, '', alive, restarts, load_s), or ('error', error line, traceback, ...) when precfuzz
        failed."""
        try:
            result: Any = self.checker.check(case, executors)
            status, tb = "ok", ""
        except Exception as exc:  # noqa: BLE001 - handed to the driver as a value, like a local internal error
            result = f"{type(exc).__name__}: {exc}"
            status, tb = "error", "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return status, result, tb, self.pool.alive(), self.pool.restarts(), self.pool.load_seconds()

    def describe(self, name: str) -> dict[str, Any]:
        """The executor's description, read on this node."""
        return self.pool.describe(name)

    def close(self) -> None:
        """Stop the workers."""
        self.pool.close()


# ---------------------------------------------------------------- the driver side


def _lost_errors() -> tuple[type[BaseException], ...]:
    """Ray's exceptions for an actor (or its node) that is gone."""
    import ray.exceptions as rx

    return (rx.RayActorError, rx.WorkerCrashedError, rx.NodeDiedError, rx.ObjectLostError)


class RayLane:
    """The driver's handle on one lane's actor; replaced (bounded) when it is lost."""

    def __init__(self, owner: "RayLanes", lane: int) -> None:
        self.owner = owner
        self.lane = lane
        self.actor: Any = None
        self.info: dict[str, Any] = {}
        self.replacements = 0
        self._alive = 0
        self._restarts_before = 0  # worker restarts of this lane's earlier actors
        self._restarts = 0
        self._load_before = 0.0  # backend load seconds of this lane's earlier actors
        self._load = 0.0

    def launch(self) -> Any:
        """Create the actor; returns the reference of its ready() answer."""
        self.actor = self.owner.actor_class.options(**self.owner.options).remote(
            self.owner.executors, self.owner.timeout_s, self.owner.max_calls, f"{self.owner.log_name}-lane{self.lane}")
        return self.actor.ready.remote()

    def accept(self, info: dict[str, Any]) -> str | None:
        """Take the actor's ready() answer: None, or why this lane cannot run there."""
        self.info = info
        self.owner.info[self.lane] = info
        if info.get("digest") != self.owner.digest or info.get("worker_code") != info.get("code"):
            return (f"lane {self.lane} on host {info.get('host')} imports precfuzz from {info.get('code')} (its workers "
                    f"from {info.get('worker_code')}), which is not "
                    "the driver's code; start the driver from its checkout, and Ray on every machine from the same venv")
        if info.get("unavailable"):
            missing = "; ".join(f"{k}: {v}" for k, v in info["unavailable"].items())
            return f"lane {self.lane} on host {info.get('host')} cannot run its executors ({missing})"
        return None

    def check(self, case: Case, executors: list[str] | None = None) -> CheckResult:
        """The actor's result on `case` (on `executors` where named); LaneLost when the actor or its node is gone."""
        import ray

        try:
            call = self.actor.check.remote(case, executors)
            status, result, tb, alive, restarts, load = ray.get(call)
        except _lost_errors() as exc:
            self._alive = 0
            raise LaneLost(f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}") from None
        except ray.exceptions.RayTaskError as exc:  # the actor method itself failed (not precfuzz's checker)
            raise RemoteCheckError(f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}", str(exc)[-4000:]) from None
        self._alive, self._restarts, self._load = alive, restarts, load
        if status != "ok":
            raise RemoteCheckError(result, tb)
        return result

    def describe(self, name: str) -> dict[str, Any]:
        """The executor's description from the actor's node (an error record if the actor is gone)."""
        import ray

        try:
            return ray.get(self.actor.describe.remote(name))
        except (*_lost_errors(), ray.exceptions.RayTaskError) as exc:
            return {"name": name, "error": f"lane {self.lane} could not describe it: {type(exc).__name__}"}

    def alive(self) -> int:
        """Worker processes running in the actor (as of its last answer)."""
        return self._alive

    def restarts(self) -> int:
        """Worker restarts over this lane's actors, plus one per replaced actor."""
        return self._restarts_before + self._restarts + self.replacements

    def load_s(self) -> float:
        """Backend load seconds over this lane's actors (as of their last answers)."""
        return self._load_before + self._load

    def replace(self) -> str | None:
        """Kill what is left of the actor and start another: None when it is ready, else why not."""
        import ray

        self._kill()
        if self.replacements >= MAX_REPLACEMENTS:
            return f"its actor was lost {self.replacements + 1} times"
        self.replacements += 1
        self._restarts_before += self._restarts
        self._restarts = 0
        self._load_before += self._load
        self._load = 0.0
        try:
            info = ray.get(self.launch(), timeout=READY_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - the lane ends with the reason
            self._kill()
            return f"its replacement did not start ({type(exc).__name__}: {str(exc)[:200]})"
        why = self.accept(info)
        if why is not None:
            self._kill()
        return why

    def _kill(self) -> None:
        import ray

        if self.actor is not None:
            try:
                ray.kill(self.actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actor = None

    def close(self) -> None:
        """Stop the actor's workers and the actor."""
        import ray

        if self.actor is not None:
            try:
                ray.get(self.actor.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - gone already: its workers died with it
                pass
        self._kill()


class RayLanes:
    """Lanes on a Ray cluster: connects, starts every lane's actor and waits until all are ready."""

    def __init__(self, address: str, executors: list[str], wanted: int, neuron_cores: float, timeout_s: float,
                 max_calls: int, log_name: str, warn: Callable[[str], None]) -> None:
        if ray_missing():
            raise LaneError(RAY_HINT)
        import ray

        self.address = address
        self.executors = list(executors)
        self.timeout_s = timeout_s
        self.max_calls = max_calls
        self.log_name = log_name
        self.options = {**lane_resources(executors, neuron_cores), "max_restarts": 0,
                        "scheduling_strategy": "SPREAD"}
        self.info: dict[int, dict[str, Any]] = {}
        self.digest = code_digest(code_root())
        self.owned = not ray.is_initialized()  # else the caller's connection, and its job's runtime_env, are used
        if self.owned:
            _init(address)
        self.actor_class = ray.remote(LaneWorker)
        self.nodes = [n for n in ray.nodes() if n.get("Alive")]
        capacity = lane_capacity(ray.cluster_resources(), self.options)
        if capacity < 1:
            self._shutdown()
            raise LaneError(f"the Ray cluster at {address} has no room for a lane (each needs "
                            f"{describe_needs(self.options)}; it has {_resources_line(ray.cluster_resources())})")
        self.count = lane_count(wanted, capacity)
        if wanted > capacity:
            warn(f"--workers {wanted}: the Ray cluster holds {capacity} lane(s) of {describe_needs(self.options)}; "
                 f"running {capacity}")
        self.lanes = [RayLane(self, k) for k in range(self.count)]
        try:
            refs = [lane.launch() for lane in self.lanes]
            infos = ray.get(refs, timeout=READY_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - a timeout or an actor that died while starting
            self.close()
            raise LaneError(f"the Ray lanes did not start within {READY_TIMEOUT_S:.0f} s "
                            f"({type(exc).__name__}: {str(exc)[:200]})") from None
        problems = [why for lane, info in zip(self.lanes, infos) if (why := lane.accept(info))]
        if problems:
            self.close()
            raise LaneError(problems[0])

    def open(self, lane: int) -> RayLane:
        """The started lane `lane`."""
        return self.lanes[lane]

    def describe(self) -> str:
        """Where the lanes run."""
        hosts = sorted({str(i.get("host")) for i in self.info.values()})
        return (f"{self.count} Ray lane(s) of {describe_needs(self.options)} on {len(self.nodes)} node(s) "
                f"({', '.join(hosts)}) at {self.address}")

    def minimizer_env(self) -> dict[str, str]:
        """The driver-side minimizer's environment (its own NeuronCore on a Neuron head)."""
        import ray

        try:
            me = ray.get_runtime_context().get_node_id()
        except Exception:  # noqa: BLE001 - a client not on a node
            me = None
        node = next((n for n in self.nodes if n.get("NodeID") == me), None)
        cores = node.get("Resources", {}).get(NEURON_RESOURCE) if node else None
        return minimizer_env(self.executors, cores if cores is not None else (0.0 if node else None))

    def close(self) -> None:
        """Stop every actor and, if this object connected, disconnect."""
        for lane in getattr(self, "lanes", []):
            lane.close()
        self._shutdown()

    def _shutdown(self) -> None:
        import ray

        if self.owned and ray.is_initialized():
            ray.shutdown()


def head_endpoint(address: str) -> tuple[str, int] | None:
    """(host, port) of a HOST:PORT address; None for 'auto', ray:// and other forms Ray resolves itself."""
    host, sep, port = address.rpartition(":")
    if not sep or "://" in address or not port.isdigit() or not host:
        return None
    return host.strip("[]"), int(port)


def unreachable(address: str, timeout_s: float = 10.0) -> str | None:
    """Why the head at `address` cannot be reached over TCP, or None (ray.init waits minutes on a wrong address)."""
    endpoint = head_endpoint(address)
    if endpoint is None:
        return None
    try:
        socket.create_connection(endpoint, timeout=timeout_s).close()
    except OSError as exc:
        return f"cannot reach the Ray head at {address}: {exc.strerror or type(exc).__name__}"
    return None


def _init(address: str) -> None:
    """ray.init on `address`, keeping this process's SIGTERM handler (Ray installs its own)."""
    import ray

    why = unreachable(address)
    if why is not None:
        raise LaneError(why)
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main else None
    try:
        ray.init(address=address, runtime_env=code_env(), log_to_driver=False, logging_level="ERROR",
                 namespace="precfuzz")
    except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ValueError...
        raise LaneError(f"cannot connect to the Ray cluster at {address}: {type(exc).__name__}: "
                        f"{str(exc).splitlines()[0][:200] if str(exc) else ''}") from None
    finally:
        if main and previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _resources_line(total: dict[str, float]) -> str:
    return ", ".join(f"{v:g} {k}" for k, v in sorted(total.items()) if not k.startswith("node:") and "memory" not in k)
