"""One rule for every output path (issue 24): precfuzz replaces only a file it can prove it wrote (a generated
header carrying the file's own sha256, or its directory's manifest), else refuses in one line naming --force.
Each command runs in-process from an empty working directory."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from campaign_fixtures import fault_stream
from op_examples import example

from fuzzer.cli import main
from fuzzer.ir import load_case, save_case
from fuzzer.outfiles import NotOurs, owned, proven, replace_file, stamp

ROOT = Path(__file__).resolve().parent.parent
SEED = str(ROOT / "corpus" / "seeds" / "xla-bf16-schedule-upcast.json")
NOTES = "# my notes about precfuzz\nprecfuzz export writes repro scripts; precfuzz-generated headers...\n"


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run precfuzz in-process; (status, stderr)."""
    capsys.readouterr()
    status = main(argv)
    return status, capsys.readouterr().err


def refused(status: int, err: str, needle: str) -> None:
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and lines[0].startswith("precfuzz: error: "), err
    assert needle in lines[0] and "--force" in lines[0], lines[0]


@pytest.fixture()
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ---------------------------------------------------------------- the proof


@pytest.mark.parametrize("style, text", [
    ("python", "#!/usr/bin/env python3\nimport sys\n"), ("python", "print(1)\n"), ("markdown", "# title\n\ntext\n"),
    ("xml", '<?xml version="1.0"?>\n<a/>\n'), ("json", '{\n "a": 1,\n "b": [2]\n}\n')])
def test_a_generated_header_proves_only_the_exact_content(style: str, text: str) -> None:
    made = stamp(text, style)
    assert proven(made.encode())
    assert "".join(line for line in made.splitlines(True) if "precfuzz-generated" not in line) == text
    assert not proven((made + "edited\n").encode())  # edited: the hash no longer matches
    assert not proven(text.encode()) and not proven(NOTES.encode())  # a keyword is no proof


def test_a_keyword_in_a_users_file_is_no_proof(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """export --out replaced any file whose first 4 KB held the word "precfuzz" (a user's notes), through a
    symlink too."""
    (workdir / "notes.py").write_text(NOTES)
    (workdir / "link.py").symlink_to("notes.py")
    for target in ("notes.py", "link.py"):
        status, err = cli(["export", SEED, "--executor", "torch/eager", "--full", "--out", target], capsys)
        refused(status, err, f"--out {target} exists and was not written by precfuzz")
    assert (workdir / "notes.py").read_text() == NOTES and (workdir / "link.py").is_symlink()


def test_export_replaces_its_own_script_not_an_edited_one_and_force_does(workdir: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["export", SEED, "--executor", "torch/eager", "--full", "--out", "repro.py"]
    assert cli(argv, capsys)[0] == 0
    first = (workdir / "repro.py").read_text()
    assert proven(first.encode()) and first.startswith("#!/usr/bin/env python3\n# precfuzz-generated sha256:")
    assert cli(argv, capsys)[0] == 0  # its own earlier export
    (workdir / "repro.py").write_text(first.replace("BUG REPRODUCED", "BUG REPRODUCED (seen 3 times)"))
    refused(*cli(argv, capsys), "--out repro.py exists and was not written by precfuzz")
    assert "seen 3 times" in (workdir / "repro.py").read_text()
    assert cli([*argv, "--force"], capsys)[0] == 0 and (workdir / "repro.py").read_text() == first


def test_an_empty_file_holds_nothing_to_lose(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "out.py").touch()
    assert cli(["export", SEED, "--executor", "torch/eager", "--full", "--out", "out.py"], capsys)[0] == 0


# ---------------------------------------------------------------- minimize


@pytest.fixture()
def faulty(workdir: Path) -> Path:
    """A case debug/faults returns wrong values for (a finding to minimize, quickly)."""
    return save_case(fault_stream(0, 2), workdir / "case.json")


@pytest.mark.parametrize("where", ["default", "out", "export-script", "export-full-script"])
def test_minimize_never_replaces_a_users_file(where: str, faulty: Path, workdir: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """minimize replaced an existing CASE.min.json at its default path."""
    argv = ["minimize", "case.json", "--executors", "debug/faults", "--quiet"]
    name = {"default": "case.min.json", "out": "mine.json", "export-script": "case.min.py",
            "export-full-script": "case.min.full.py"}[where]
    argv += ["--out", "mine.json"] if where == "out" else ["--export"] if where.startswith("export") else []
    (workdir / name).write_text("precious\n")
    before = sorted(os.listdir(workdir))
    status, err = cli(argv, capsys)
    refused(status, err, f"{name} exists and was not written by precfuzz")
    assert (workdir / name).read_text() == "precious\n" and sorted(os.listdir(workdir)) == before


@pytest.mark.slow
def test_minimize_replaces_its_own_case_and_force_replaces_any(faulty: Path, workdir: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["minimize", "case.json", "--executors", "debug/faults", "--quiet", "--max-seconds", "20"]
    assert cli(argv, capsys)[0] == 0
    made = workdir / "case.min.json"
    assert proven(made.read_bytes()) and load_case(made).graph.nodes
    assert cli(argv, capsys)[0] == 0
    made.write_text(made.read_text().replace('"seed"', '"seed" ', 1))
    refused(*cli(argv, capsys), "the minimized case case.min.json exists and was not written by precfuzz")
    assert cli([*argv, "--force"], capsys)[0] == 0 and proven(made.read_bytes())


def test_minimize_refuses_two_cases_that_would_write_one_file(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "a").mkdir()
    save_case(example("add"), workdir / "a" / "c.json")
    save_case(example("add"), workdir / "c.json")
    status, err = cli(["minimize", "a/c.json", "c.json", "--out", "o/", "--executors", "torch/eager"], capsys)
    assert status == 2 and "one would overwrite the other" in err


# ---------------------------------------------------------------- audit, report, smoke, generate


def test_audit_save_case_never_replaces_a_users_file_and_the_model_is_not_loaded(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """audit --save-case replaced a user's file that export would refuse."""
    (workdir / "model.py").write_text("raise SystemExit('the model must not be loaded')\n")
    (workdir / "case.json").write_text('{"mine": true}\n')
    refused(*cli(["audit", "model.py", "--save-case", "case.json"], capsys), "--save-case case.json exists and was not")
    assert (workdir / "case.json").read_text() == '{"mine": true}\n'


@pytest.fixture()
def campaign(workdir: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    from campaign_fixtures import fault_stream

    from fuzzer.campaign import Campaign, CampaignConfig
    from fuzzer.campaign.progress import Progress

    Campaign(CampaignConfig(out=workdir / "camp", executors=["debug/faults"], seed=3, max_tests=8, minimize=False,
                            generate=fault_stream), Progress(stream=open(os.devnull, "w"), live=False)).run()
    return workdir / "camp"


@pytest.mark.parametrize("name", ["report.md", "error_ratio_heatmap.png", "bugs_over_time.png"])
def test_report_replaces_only_what_it_wrote(name: str, campaign: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["report", "camp"], capsys)[0] == 0
    assert cli(["report", "camp"], capsys)[0] == 0  # its own report and plots
    assert proven((campaign / "report.md").read_bytes())
    (campaign / name).write_bytes(b"a user's file\n")
    refused(*cli(["report", "camp"], capsys), f"{name}: exists and was not written by precfuzz")
    assert (campaign / name).read_bytes() == b"a user's file\n"
    assert cli(["report", "camp", "--force"], capsys)[0] == 0 and (campaign / name).read_bytes() != b"a user's file\n"


SMOKE = ["smoke", "--out", "s", "--max-tests", "2", "--executors", "torch/eager", "--workers", "1", "--baseline", ""]


@pytest.mark.parametrize("option", ["--junit", "--summary", "--write-baseline"])
def test_smoke_outputs_never_replace_a_users_file(option: str, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "mine.txt").write_text("precious\n")
    refused(*cli([*SMOKE, option, "mine.txt"], capsys), f"{option} mine.txt exists and was not written by precfuzz")
    assert (workdir / "mine.txt").read_text() == "precious\n" and not (workdir / "s").exists()


def test_smoke_empties_only_a_directory_it_made_of_files_it_wrote(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fuzzer.commands.common import UsageError
    from fuzzer.commands.smoke import MARKER, fresh_out

    out = workdir / "s"
    fresh_out(out)
    assert proven((out / MARKER).read_bytes())
    replace_file(out / "junit.xml", "<testsuites/>\n", style="xml")  # a --junit file smoke wrote there
    (out / "findings").mkdir()
    fresh_out(out)
    assert os.listdir(out) == [MARKER]
    (out / "notes.txt").write_text("mine\n")
    with pytest.raises(UsageError, match="'notes.txt', which precfuzz smoke did not write"):
        fresh_out(out)
    assert (out / "notes.txt").read_text() == "mine\n"
    forged = workdir / "forged"
    forged.mkdir()
    (forged / MARKER).write_text("made by precfuzz smoke; the next smoke run with this --out empties it\n")
    (forged / "data.txt").write_text("mine\n")
    with pytest.raises(UsageError, match="was not made by precfuzz smoke"):
        fresh_out(forged)
    assert (forged / "data.txt").exists()


def test_generate_never_replaces_a_users_case_file(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["generate", "--count", "1", "--seed", "7", "--out", "cases"], capsys)[0] == 0
    (path,) = (workdir / "cases").iterdir()
    assert cli(["generate", "--count", "1", "--seed", "7", "--out", "cases"], capsys)[0] == 0  # its own
    path.write_text(path.read_text().replace("\n", "\n ", 1))
    status, err = cli(["generate", "--count", "1", "--seed", "7", "--out", "cases"], capsys)
    assert status == 2 and "was not written by precfuzz" in err and "--force" in err
    assert cli(["generate", "--count", "1", "--seed", "7", "--out", "cases", "--force"], capsys)[0] == 0


def test_a_saved_case_loads_and_keeps_its_id(tmp_path: Path) -> None:
    case = example("layer_norm")
    path = save_case(case, tmp_path / "c.json")
    assert json.loads(path.read_text())["precfuzz-generated"].startswith("sha256:")
    assert load_case(path).id == case.id and owned(path)
    path.write_text("{}\n")
    with pytest.raises(NotOurs):
        save_case(case, path)
    assert path.read_text() == "{}\n"
