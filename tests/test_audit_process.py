"""audit runs the user's model in a process of its own (issue 24): whatever the outcome, every process the model
started ends with the audit's capture (its group, and a new session it made too), and any exception from the
model's code, BaseException subclasses included, is bad input (exit 2), never an internal error."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from fuzzer.audit.load import capture_isolated
from fuzzer.audit.translate import AuditInputError
from fuzzer.cli import main

MODEL = """
import os, subprocess, sys, time, torch

def spawn():
    how = {how!r}
    if how == "daemon":  # fork twice, new session, the middle one exits: the classic daemon
        pid = os.fork()
        if pid == 0:
            os.setsid()
            if os.fork():
                os._exit(0)
            open({pids!r}, "a").write(f"{{os.getpid()}}\\n")
            time.sleep(300)
            os._exit(0)
        os.waitpid(pid, 0)
        return
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                            start_new_session=(how == "session"))
    open({pids!r}, "a").write(f"{{proc.pid}}\\n")

def make():
    spawn()
    {end}
    return torch.nn.Linear(4, 4), (torch.ones(2, 4),)
"""

ENDS = {"returns": "pass", "raises": "raise ValueError('after starting a process')", "hangs": "time.sleep(300)",
        "exits": "os._exit(3)"}


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("end", list(ENDS))
@pytest.mark.parametrize("how", ["child", "session", "daemon"])
def test_every_process_the_model_started_ends_whatever_the_outcome(how: str, end: str, tmp_path: Path) -> None:
    """A model's background process outlived a successful audit; one in a new session (or a daemon) outlived any."""
    pids = tmp_path / "pids"
    model = tmp_path / "model.py"
    model.write_text(MODEL.format(how=how, pids=str(pids), end=ENDS[end]))
    if end == "returns":
        assert capture_isolated(model, "make", "model", 120).case.graph.nodes
    else:
        with pytest.raises(AuditInputError):
            capture_isolated(model, "make", "model", 5 if end == "hangs" else 120)
    started = [int(p) for p in pids.read_text().split()]
    assert started
    deadline = time.monotonic() + 10
    while any(alive(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in started if alive(p)], f"still running: {started}"


RAISERS = [
    ("base-exception-subclass-in-make", "class Stop(BaseException):\n    pass\n\ndef make():\n    raise Stop('no')\n",
     "make() raised Stop: no"),
    ("keyboard-interrupt-in-make", "def make():\n    raise KeyboardInterrupt\n", "make() raised KeyboardInterrupt"),
    ("generator-exit-at-import", "raise GeneratorExit('bye')\n", "importing it raised GeneratorExit: bye"),
    ("base-exception-in-forward", "import torch\nclass Stop(BaseException):\n    pass\n"
     "class M(torch.nn.Module):\n    def forward(self, x):\n        raise Stop('in forward')\n"
     "def make():\n    return M(), (torch.ones(2),)\n", "the model raised Stop: in forward while it was exported"),
    ("unprintable-exception", "class E(Exception):\n    def __str__(self):\n        raise RuntimeError\n"
     "def make():\n    raise E()\n", "make() raised E: (its message cannot be printed)"),
]


@pytest.mark.parametrize("name, source, needle", RAISERS, ids=[r[0] for r in RAISERS])
def test_any_exception_from_the_models_code_is_bad_input(name: str, source: str, needle: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A BaseException subclass raised by make() was an internal error (exit 3)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.py").write_text(source)
    status = main(["audit", "model.py", "--executors", "torch/eager"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and err[-1].startswith("precfuzz: error: ") and needle in err[-1], err
    assert "Traceback" not in "\n".join(err) and not (tmp_path / "results").exists()
    assert sorted(os.listdir(tmp_path)) == ["model.py"] or "__pycache__" in os.listdir(tmp_path)


def _spawning_model(tmp_path: Path, how: str = "session", end: str = "hangs") -> tuple[Path, Path]:
    """A model whose make() starts a process (in a session of its own) and then hangs; (model, file of its pids)."""
    pids = tmp_path / "pids"
    model = tmp_path / "model.py"
    model.write_text(MODEL.format(how=how, pids=str(pids), end=ENDS[end]))
    return model, pids


def _wait_ended(pids: list[int], seconds: float = 10.0) -> list[int]:
    """The pids still running after up to `seconds`."""
    deadline = time.monotonic() + seconds
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_regression_a_terminating_signal_to_audit_ends_the_models_process_tree(signame: str, tmp_path: Path) -> None:
    """SIGTERM or SIGHUP to `precfuzz audit` left the model's processes running (Ctrl-C did not)."""
    import signal
    import subprocess
    import sys

    model, pids = _spawning_model(tmp_path)
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen([sys.executable, "-m", "fuzzer.cli", "audit", str(model), "--executors", "torch/eager",
                             "--out", str(tmp_path / "out")], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (pids.exists() and pids.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.1)
        started = [int(p) for p in pids.read_text().split()]
        proc.send_signal(getattr(signal, signame))
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 128 + getattr(signal, signame), err
    assert not _wait_ended(started), f"still running after {signame}: {started}"


def test_regression_zoo_ends_within_its_timeout_when_the_models_orphans_hold_its_pipes(tmp_path: Path,
                                                                                       capsys) -> None:
    """`precfuzz zoo --timeout 25` on a model whose process outlives its audit was still running at 200 s, waiting
    on pipes that process held; now it ends within the timeout plus a few seconds, and so does that process."""
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    model, pids = _spawning_model(zoo)
    t0 = time.monotonic()
    status = main(["zoo", "--dir", str(zoo), "--timeout", "8", "--executors", "torch/eager", "--no-inventory",
                   "--out", str(tmp_path / "out")])
    assert time.monotonic() - t0 < 8 + 15
    assert status == 1, capsys.readouterr().err
    assert "did not finish within 8 s" in (tmp_path / "out" / "zoo.md").read_text()
    started = [int(p) for p in pids.read_text().split()]
    assert started and not _wait_ended(started), f"still running: {started}"
