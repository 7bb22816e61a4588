"""Campaign report: report.md with plots (worst error ratio by op and dtype, findings over time) and the findings table."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from oracles.vocabulary import Kind

from .. import markdown as md
from ..executors.tvm_exec import PIPELINES
from ..outfiles import claim, replace_file
from .store import CampaignStore


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def ratio_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Worst finite error ratio per (executor, op, output dtype), one row per op x dtype per executor."""
    if runs.empty or "ratio" not in runs:
        return pd.DataFrame(columns=["executor", "op", "out_dtype", "ratio"])
    ok = runs[(runs["status"] == "ok") & runs["ratio"].notna()].copy()
    ok["ratio"] = ok["ratio"].replace([np.inf], 1e6)
    # an out-of-bound result counts for the op the probe run pinned it on; a clean one for every op of its graph
    pinned = ok["fault_op"].fillna("") if "fault_op" in ok else pd.Series("", index=ok.index)
    ok = ok.assign(op=ok["ops"].where(pinned == "", pinned).str.split(",")).explode("op")
    ok["out_dtype"] = ok["out_dtype"].str.split(",").str[0]
    return ok.groupby(["executor", "op", "out_dtype"], as_index=False)["ratio"].max()


REPORT, HEATMAP, TIMELINE = "report.md", "error_ratio_heatmap.png", "bugs_over_time.png"  # what a report writes


def _save_png(fig: Any, path: Path, force: bool) -> None:
    """The figure as PNG at `path`, through the one safe writer (the directory's manifest proves it is ours)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    replace_file(path, buf.getvalue(), sync=False, manifest=True, force=force)


def heatmap(table: pd.DataFrame, path: Path, force: bool = False) -> bool:
    """One heatmap panel per executor of log10(worst ratio); False when there is nothing to plot."""
    if table.empty:
        return False
    plt = _plt()
    executors = sorted(table["executor"].unique())
    ops = sorted(table["op"].unique())
    dtypes = sorted(table["out_dtype"].unique())
    fig, axes = plt.subplots(1, len(executors), figsize=(2.2 + 1.1 * len(dtypes) * len(executors), 0.35 * len(ops) + 2),
                             squeeze=False)
    for ax, name in zip(axes[0], executors):
        sub = table[table["executor"] == name].pivot(index="op", columns="out_dtype", values="ratio")
        sub = sub.reindex(index=ops, columns=dtypes)
        data = np.log10(np.clip(sub.to_numpy(dtype=float), 1e-3, 1e6))
        im = ax.imshow(data, cmap="RdYlGn_r", vmin=-2, vmax=3, aspect="auto")
        ax.set_xticks(range(len(dtypes)), dtypes, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(ops)), ops if ax is axes[0][0] else [""] * len(ops), fontsize=7)
        ax.set_title(name, fontsize=8)
        for (i, j), v in np.ndenumerate(sub.to_numpy(dtype=float)):
            if not math.isnan(v):
                ax.text(j, i, f"{v:.2g}", ha="center", va="center", fontsize=5)
    fig.colorbar(im, ax=axes[0].tolist(), label="log10 worst error / allowed error (>0 is a finding)")
    fig.suptitle("Worst error ratio by op and output dtype")
    try:
        _save_png(fig, path, force)
    finally:
        plt.close(fig)
    return True


def timeline(bugs: list[dict[str, Any]], path: Path, force: bool = False) -> bool:
    """Cumulative bugs over campaign time, one step line per kind; False when there are none."""
    live = _dated(bugs)
    if not live:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for kind in (Kind.BACKEND_BUG, Kind.MODEL_HAZARD, Kind.UNSUPPORTED):
        times = sorted(float(b["first_seen_s"]) for b in live if b.get("kind") == kind)
        if times:
            ax.step([0.0] + times, list(range(len(times) + 1)), where="post", label=kind)
    ax.set_xlabel("campaign time (s)")
    ax.set_ylabel("bugs found")
    ax.legend(fontsize=7)
    ax.set_title("Bugs over time")
    try:
        _save_png(fig, path, force)
    finally:
        plt.close(fig)
    return True


def _dated(bugs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The live bugs the timeline plots."""
    return [b for b in bugs if not b.get("merged_into") and b.get("first_seen_s") is not None]


def _target(path: Any) -> str:
    """A link target from a record's path: one line, no angle brackets (it goes between < and >)."""
    return "".join(c for c in " ".join(str(path).split()) if c not in "<>")


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.3g}"
    return md.text(v)


def bug_sections(bugs: list[dict[str, Any]]) -> list[str]:
    """The bug tables: backend bugs, model hazards, coverage gaps (one row per root cause)."""
    live = [b for b in bugs if not b.get("merged_into")]
    link = lambda p, name: f"[{name}](<{_target(p)}>)" if p else ""  # noqa: E731
    lines: list[str] = []
    for kind, head, blurb in (
            (Kind.BACKEND_BUG, "Backend bugs", "One row per root cause; each links a minimized, standalone repro script "
             "(exits 1 while the bug is there) and a bug-report draft."),
            (Kind.MODEL_HAZARD, "Model hazards", "The model itself breaks under a precision policy (PyTorch eager raises "
             "too): worth a cast in the model, not an upstream report."),
            (Kind.UNSUPPORTED, "Coverage gaps", "What a backend cannot express (not a failure).")):
        mine = [b for b in live if b.get("kind") == kind]
        lines += [f"## {head} ({len(mine)})", "", blurb, ""]
        if not mine:
            lines += ["None.", ""]
            continue
        lines += ["| # | title | pass | backend | executors | minimized | confirmed | nodes | repro | report | first seen (s) | hits |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for k, b in enumerate(sorted(mine, key=lambda b: b.get("first_seen_s", 0)), 1):
            title = md.text(b.get("title") or b.get("key"))
            lines.append(f"| {k} | {title} | {pass_kind(b)} | {md.text(b.get('backend'))} | {md.text(', '.join(map(str, b.get('executors', []))))} | "
                         f"{'yes' if b.get('minimized') else 'no'} | {'yes' if b.get('confirmed') else 'no'} | "
                         f"{_fmt(b.get('nodes'))} | {link(b.get('repro'), 'repro.py')} | {link(b.get('report'), 'report.md')} | "
                         f"{_fmt(b.get('first_seen_s'))} | {md.text(b.get('count', 0))} |")
        lines.append("")
    return lines + pass_section(live)


def pass_kind(bug: dict[str, Any]) -> str:
    """`backward` for a bug of a gradient (its key's error family says so), else `forward`."""
    return "backward" if "|backward-" in str(bug.get("key", "")) else "forward"


def pass_of(bug: dict[str, Any]) -> str:
    """The Relax pass a TVM bug is pinned on: the `pass:<Name>` variant, a pipeline variant, or the default build."""
    variant = str(bug.get("key", "")).rsplit("|", 1)[-1]
    if variant.startswith("pass:"):
        return variant.removeprefix("pass:")
    passes = PIPELINES.get(variant)
    if passes:  # a fixed pipeline's own passes
        return ", ".join(p if isinstance(p, str) else p[0] for p in passes)
    return {"frontend": "from_exported_program (the torch frontend)", "mixed-precision": "ToMixedPrecision"}.get(
        variant, "(the default pipeline)")


def pass_section(live: list[dict[str, Any]]) -> list[str]:
    """TVM backend bugs grouped by the pass whose removal makes them disappear (empty without TVM bugs)."""
    tvm = [b for b in live if b.get("kind") == Kind.BACKEND_BUG and b.get("backend") == "tvm"]
    if not tvm:
        return []
    by_pass: dict[str, list[dict[str, Any]]] = {}
    for b in tvm:
        by_pass.setdefault(pass_of(b), []).append(b)
    lines = ["## TVM bugs by pass", "", "| pass | bugs | titles |", "|---|---|---|"]
    for name in sorted(by_pass, key=lambda n: (n.startswith("("), n)):
        titles = "; ".join(md.text(b.get("title") or b.get("key")) for b in by_pass[name])
        lines.append(f"| {md.text(name)} | {len(by_pass[name])} | {titles} |")
    return lines + [""]


def write_report(root: Path, force: bool = False) -> Path:
    """Write root/report.md and its PNGs; returns the report path. A file in their place that precfuzz did not
    write is kept (outfiles.NotOurs) unless `force`."""
    store = CampaignStore(root, read_only=True)  # a report changes no campaign file
    findings = store.load_findings()
    bugs = store.load_bugs()
    runs = store.load_runs()
    state = store.load_state(known_executors=False) or {}  # a report reads what an older precfuzz ran too
    table = ratio_table(runs)
    for name, proof, made in ((REPORT, False, True), (HEATMAP, True, not table.empty),
                              (TIMELINE, True, bool(_dated(bugs)))):  # each file it will write, before any is
        if made:
            claim(root / name, force, manifest=proof)
    has_heat = heatmap(table, root / HEATMAP, force)
    has_time = timeline(bugs, root / TIMELINE, force)
    lines = [f"# precfuzz campaign report: {md.text(root.name)}", "",
             "precfuzz runs generated op graphs on several backends. PyTorch eager on the CPU, running the program of "
             "each precision policy, says which status and dtypes are right; the numbers are compared with a float64 "
             "reference on the same rounded inputs, and an executor may lose at most 3x what an ideal implementation "
             "of its dtypes loses (plus 2 ULP), by a margin of 2. Findings are grouped into bugs, one per root cause.",
             "",
             f"- cases: {state.get('cases', 0)}, tests (executor x input set): {state.get('tests', 0)}, "
             f"campaign time: {state.get('elapsed_s', 0):.0f} s, seed {state.get('seed')}",
             f"- executors: {md.text(', '.join(map(str, state.get('executors', []))))}",
             f"- bugs: {sum(1 for b in bugs if not b.get('merged_into') and b.get('kind') == Kind.BACKEND_BUG)} backend bugs "
             f"({sum(1 for b in bugs if not b.get('merged_into') and b.get('kind') == Kind.BACKEND_BUG and pass_kind(b) == 'backward')}"
             " of them in the backward pass), "
             f"{sum(1 for b in bugs if not b.get('merged_into') and b.get('kind') == Kind.MODEL_HAZARD)} model hazards, "
             f"{sum(1 for b in bugs if not b.get('merged_into') and b.get('kind') == Kind.UNSUPPORTED)} coverage gaps "
             f"(from {len(findings)} distinct findings)", ""]
    lines += bug_sections(bugs)
    if not runs.empty:
        counts = runs.groupby(["executor", "status"]).size().unstack(fill_value=0)
        lines += ["## Outcomes per executor", "", "| executor | " + " | ".join(counts.columns) + " |",
                  "|---|" + "---|" * len(counts.columns)]
        lines += [f"| {ex} | " + " | ".join(str(int(v)) for v in row) + " |" for ex, row in counts.iterrows()]
        lines.append("")
    if has_heat:
        lines += ["## Worst error ratio by op and dtype", "", f"![heatmap]({HEATMAP})", "",
                  "Each cell is the worst error / allowed error seen for that op with that output dtype; above 1 (red) "
                  "is a finding. An out-of-bound result counts only for the op its finding was localized on; a clean "
                  "result counts for every op of its graph.", ""]
    if has_time:
        lines += ["## Bugs over time", "", f"![timeline]({TIMELINE})", ""]
    lines += ["## Findings (the detailed record: one per signature)", ""]
    if findings:
        lines += ["| # | bug | oracle | executor | ops | dtypes | ratio | max ULP | count | first seen (s) | case | repro | report |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for k, f in enumerate(findings, 1):
            link = lambda p: f"[{md.text(Path(p).name)}](<{_target(p)}>)" if p else ""  # noqa: E731
            lines.append(f"| {k} | {md.text(f.get('bug', ''))} | {md.text(f['oracle'])} | {md.text(f['executor'])} | "
                         f"{md.text('+'.join(f['ops']))} | {md.text(', '.join(f['dtypes']))} | "
                         f"{_fmt(f.get('ratio'))} | {_fmt(f.get('max_ulp'))} | {md.text(f.get('count', 1))} | "
                         f"{_fmt(f.get('first_seen_s'))} | {link(f.get('case'))} | {link(f.get('repro'))} | "
                         f"{link(f.get('report'))} |")
        lines += ["", "Messages:", ""]
        lines += [f"{k}. {md.code(f['signature'])}: {md.text(f['message'])}" for k, f in enumerate(findings, 1)]
    else:
        lines.append("No findings.")
    out = root / REPORT
    replace_file(out, "\n".join(lines) + "\n", sync=False, style="markdown", force=force)
    return out
