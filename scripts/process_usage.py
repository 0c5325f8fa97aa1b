"""Wall time, CPU time and peak memory of a command run in a fresh process, for the benchmarks.

Quoted in: nowhere on its own: a helper module of bench_vs_llm.py and bench_scale_cli.py (not run by itself).
"""

from __future__ import annotations

import json
import subprocess
import sys

# Runs the command given as its arguments and prints what it used as JSON (ru_maxrss is KiB on Linux).
WRAPPER = (
    "import json, resource, subprocess, sys, time\n"
    "started = time.perf_counter()\n"
    "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
    "wall = time.perf_counter() - started\n"
    "if code.returncode: sys.exit(code.stderr.decode()[-2000:])\n"
    "usage = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(json.dumps({'wall': wall, 'cpu': usage.ru_utime + usage.ru_stime, 'rss_kb': usage.ru_maxrss}))\n"
)


def measure(command: list, env: dict) -> dict:
    """{'wall': s, 'cpu': s, 'rss_kb': peak KiB} of `command`; a failing command stops the benchmark, saying why."""
    command = [str(part) for part in command]
    out = subprocess.run([sys.executable, "-c", WRAPPER, *command], capture_output=True, text=True, env=env)
    if out.returncode:
        raise SystemExit(f"failed: {' '.join(command)}\n{out.stderr}")
    return json.loads(out.stdout)
