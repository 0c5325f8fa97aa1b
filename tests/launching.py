"""Real build processes (tests/build_launcher.py) stopped or paused at chosen points of a build."""

import os
import subprocess
import sys
from pathlib import Path

LAUNCHER = Path(__file__).resolve().parent / "build_launcher.py"
# The points of a build where the launcher can kill or pause it (PAPERS_TEST_POINT).
POINTS = ["after-encoding", "after-files", "before-rename", "before-current", "after-current"]


def launch(workdir: Path, *args: str, point: str = "", action: str = "kill", sync: Path | None = None):
    env = dict(os.environ, PAPERS_TEST_POINT=point, PAPERS_TEST_ACTION=action)
    env.pop("PAPERS_INDEX", None)
    if sync is not None:
        sync.mkdir(exist_ok=True)
        env["PAPERS_TEST_SYNC"] = str(sync)
    return subprocess.Popen([sys.executable, str(LAUNCHER), *args], cwd=workdir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen) -> tuple[int, str, str]:
    stdout, stderr = process.communicate(timeout=300)
    return process.returncode, stdout, stderr
