"""Benchmark of markdown rendering: how long a large document takes to become reader HTML.

`python -m bench.render_bench [--runs N] [--out FILE]` renders, in-process, documents of 64 KiB
and 1 MiB built from the core benchmark's markdown generator (headings, paragraphs, lists,
tables, code, quotes), the 1 MiB one again after a one-paragraph edit (its unchanged code blocks
are highlighted from memory; every other row is cold), this project's own README repeated to
1 MiB, and two adversarial inputs
the renderer bounds (an unmatched-bracket flood and 1 MiB of dense emphasis). It reports CPU and
wall time (p50 and the slowest of N runs), whether the output was degraded (the rest shown as
plain text), and the issue's aim: a 1 MiB document renders in under a second.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024
EDITED = "generated 1 MiB, re-rendered after an edit"


def _inputs() -> dict[str, str]:
    from bench.knowledge_bench import Markdown, fit

    def generated(size: int, seed: str) -> str:
        md = Markdown(random.Random(seed))
        parts, total = [f"# {md.title()}\n\n"], 0
        while total < size:
            piece = md.heading() if md.rng.random() < 0.12 else md.block()
            parts.append(piece)
            total += len(piece.encode("utf-8"))
        return fit("".join(parts), size)

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    one_mib = generated(MIB, "render:1m")
    middle = len(one_mib) // 2
    return {
        "generated 64 KiB": generated(64 * 1024, "render:64k"),
        "generated 1 MiB": one_mib,
        EDITED: one_mib[:middle] + "\n\nA paragraph added by the edit.\n\n" + one_mib[middle:],
        "README x N, 1 MiB": (readme * (MIB // len(readme) + 1))[:MIB],
        "bracket flood, 60 KB": "[x " * 20_000,
        "dense emphasis, 1 MiB": "\n\n".join(["*a* " * 500] * 520),
        "pasted HTML table, 1 MiB": ("<table>\n" + "<tr><td>cell</td><td>value</td></tr>\n" * 30_000)[:MIB],
    }


def measure(runs: int) -> list[dict[str, Any]]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from knowledge.rendering import _highlight_small, render_markdown

    render_markdown("# warm up\n\n```python\nx = 1\n```\n")
    rows = []
    inputs = _inputs()
    for name, content in inputs.items():
        cpu, wall = [], []
        degraded = False
        for _ in range(runs):
            if name == EDITED:  # the process has highlighted the unedited document's blocks
                render_markdown(inputs["generated 1 MiB"], namespace="bench", path="big.md")
            else:  # every other row is a cold render
                _highlight_small.cache_clear()
            started_cpu, started_wall = time.process_time(), time.perf_counter()
            rendered = render_markdown(content, namespace="bench", path="big.md")
            cpu.append(time.process_time() - started_cpu)
            wall.append(time.perf_counter() - started_wall)
            degraded = rendered.degraded
        rows.append(
            {
                "input": name,
                "bytes": len(content.encode("utf-8")),
                "runs": runs,
                "cpu_p50_s": round(statistics.median(cpu), 3),
                "cpu_max_s": round(max(cpu), 3),
                "wall_p50_s": round(statistics.median(wall), 3),
                "degraded": degraded,
            }
        )
    return rows


def report(rows: list[dict[str, Any]]) -> str:
    lines = [
        "### Rendering (in-process, Python-Markdown + pymdown + Pygments + sanitizer)",
        "",
        "| input | bytes | CPU p50 s | CPU max s | wall p50 s | degraded | aim |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for row in rows:
        aim = "< 1 s" if row["input"].startswith(("generated 1", "README")) else "bounded"
        lines.append(
            f"| {row['input']} | {row['bytes']} | {row['cpu_p50_s']} | {row['cpu_max_s']} | {row['wall_p50_s']} | "
            f"{'yes' if row['degraded'] else 'no'} | {aim} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = measure(args.runs)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=1))
    print(report(rows))


if __name__ == "__main__":
    main()
