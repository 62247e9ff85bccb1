"""Median and range of every row over several `cargo xtask bench` JSONs
(issue 16, item 5). Run: python3 benches/summarize_runs.py RUN.json... > table.md"""
import json
import statistics
import sys

runs = [json.load(open(p)) for p in sys.argv[1:]]
names = set().union(*({r["name"] for r in run["rows"]} for run in runs))
print("Runs: " + "; ".join(f"{p} ({run['commit']}, {run['date']})" for p, run in zip(sys.argv[1:], runs)))
print()
print("| row | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " | median | range |")
print("|---|" + "---|" * (len(runs) + 2))


def fmt(name, v):
    """As xtask's `fmt_value`: ratios bare, peer bandwidths in GB/s, times
    from nanoseconds."""
    if name.startswith("ratio/"):
        return f"{v:.3f}"
    if name.startswith("peer/"):
        return f"{v:.1f} GB/s"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if v >= scale:
            return f"{v / scale:.3f} {unit}"
    return f"{v:.1f} ns"


for name in sorted(names, key=lambda n: (not n.startswith("ratio/"), n)):
    vals = [next((r["value"] for r in run["rows"] if r["name"] == name), None) for run in runs]
    got = [v for v in vals if v is not None]
    cells = [fmt(name, v) if v is not None else "-" for v in vals]
    med = fmt(name, statistics.median(got))
    rng = f"{fmt(name, min(got))} - {fmt(name, max(got))}"
    print(f"| {name} | " + " | ".join(cells) + f" | {med} | {rng} |")
