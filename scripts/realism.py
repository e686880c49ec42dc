"""The realism table of docs/realism.md: agentload traces against real coding-agent sessions.

    python scripts/realism.py TRACE... [--real TRACE...] [--label NAME] [--json]

Per statistic (``agentload.trace.samples``) it prints our p10 / p50 / p90 over the given
traces (pooled), the real median from the published figures in ``realism_reference.json``
(each cited there), the ratio of the medians and whether it is within ±25%. With ``--real``
(imported public traces: ``agentload trace import weka|tracelab ...``) the real side is also
measured from those traces with the same code (``trace stats --compare``), in extra columns.
``tool_latency_s`` is every tool call pooled; the per-kind rows follow it. Our
``cross_session_prefix_tokens`` is the static prefix (tools + system prompt) of each root
agent's first call: what replay shares across sessions (``static_prefix``). ``--json`` prints
the rows as one JSON object (last line). Bad input: one line, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from agentload.errors import AgentloadError
from agentload.tokenizer import ChatTokenCounter
from agentload.trace.comparison import DEFAULT_TOLERANCE, compare, format_value, summarize
from agentload.trace.paths import trace_files
from agentload.trace.samples import Samples, describe, trace_samples
from agentload.trace.trace import Trace, load_trace

REFERENCE = Path(__file__).with_name("realism_reference.json")


def static_prefix(trace: Trace) -> list[float]:
    """Per root agent, the tokens of its first call's tools and leading system messages: the
    prefix every session of the agent shares, which replay's default ``--salt-at
    after-system`` leaves shared across sessions (the salt follows it). Generated sessions of
    one scenario share their whole first prompt (one workspace, one task), so the block-hash
    measure of the samples would count all of it. Empty for a trace without message text."""
    if trace.header.source is not None or trace.header.redacted:
        return []
    counter = ChatTokenCounter(trace.header.tokenizer)
    out = []
    for agent in trace.agents.values():
        calls = trace.calls_of(agent.id)
        if agent.parent_agent_id is not None or not calls:
            continue
        tools = trace.tools(calls[0])
        n = len(counter.ids_for_tools(tools)) if tools else 0
        for m in trace.messages(calls[0]):
            if m.get("role") not in ("system", "developer"):
                break
            n += len(counter.ids_for_message(m))
        out.append(float(n))
    return out


def pooled(paths: list[str], static: bool = False) -> tuple[Samples, list[Path]]:
    files = trace_files(paths)
    out = Samples()
    for path in files:
        trace = load_trace(path)
        samples = trace_samples(trace)
        if static:
            samples.values["cross_session_prefix_tokens"] = static_prefix(trace)
        out.extend(samples)
    kinds = [k for k in out.values if k.startswith("tool_latency_s.")]
    out.values["tool_latency_s"] = [x for k in kinds for x in out.values[k]]
    return out, files


def rows(ours: Samples, reference: dict[str, Any], real: Samples | None) -> list[dict[str, Any]]:
    measured = compare(ours, real).get("statistics", {}) if real is not None else {}
    names = list(reference["statistics"])
    kinds = sorted(k for k in ours.values if k.startswith("tool_latency_s."))
    order = []
    for name in names:
        order.append(name)
        if name == "tool_latency_s":
            order.extend(kinds)
    out = []
    for stat in order:
        ref = reference["statistics"].get(stat)
        summary = summarize(ours.get(stat))
        if stat == "prefix_reuse":  # the token-weighted figure over every call, like theirs
            seen, total = ours.reuse_tokens
            summary["p50"] = seen / total if total else None
        p50 = summary["p50"]
        row: dict[str, Any] = {
            "statistic": stat,
            **summary,
            "real_median": ref["median"] if ref else None,
            "source": ref["source"] if ref else None,
            "note": ref["note"] if ref else None,
        }
        real_median = row["real_median"]
        if p50 is not None and real_median not in (None, 0):
            row["ratio"] = p50 / real_median
            row["within"] = abs(row["ratio"] - 1) <= DEFAULT_TOLERANCE
        else:
            row["ratio"] = row["within"] = None
        m = measured.get(stat)
        if m is not None:
            row["measured_real"] = {"p50": m["b"]["p50"], "n": m["b"]["n"], "ks": m["ks"]}
        out.append(row)
    return out


def markdown(table: list[dict[str, Any]], label: str, with_real: bool) -> str:
    head = f"| statistic | {label} p10 / p50 / p90 | real median | ratio | ±25% |"
    rule = "|---|---|---|---|---|"
    if with_real:
        head += " imported p50 (n) | KS D |"
        rule += "---|---|"
    lines = [head + " source |", rule + "---|"]
    for r in table:
        stat = r["statistic"]
        ours = " / ".join(format_value(stat, r[k], 3) for k in ("p10", "p50", "p90"))
        within = "-" if r["within"] is None else ("yes" if r["within"] else "no")
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        line = f"| {describe(stat)} | {ours} | {format_value(stat, r['real_median'], 3)} | {ratio} | {within} |"
        if with_real:
            m = r.get("measured_real")
            if m is None:
                line += " - | - |"
            else:
                ks = "-" if m["ks"] is None else f"{m['ks']['d']:.2f}"
                line += f" {format_value(stat, m['p50'], 3)} ({m['n']}) | {ks} |"
        lines.append(line + f" {r['source'] or '-'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+", help="agentload traces (files or directories)")
    ap.add_argument("--real", nargs="+", default=None, help="imported public traces")
    ap.add_argument("--label", default="agentload", help="name of our side in the table")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON instead")
    args = ap.parse_args(argv)
    try:
        reference = json.loads(REFERENCE.read_text(encoding="utf-8"))
        ours, files = pooled(args.traces, static=True)
        real = pooled(args.real)[0] if args.real else None
    except (AgentloadError, OSError, ValueError) as exc:
        print(f"realism: {exc}", file=sys.stderr)
        return 2
    table = rows(ours, reference, real)
    if args.json:
        print(json.dumps({"traces": [str(f) for f in files], "rows": table}))
    else:
        print(markdown(table, args.label, real is not None))
        print(f"\n{args.label}: {', '.join(f.name for f in files)}")
        for key, text in reference["sources"].items():
            print(f"- {key}: {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
