"""What the machine allows a test: dropping root's permission overrides, and filling a disk."""

import errno
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

NO_OVERRIDES = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps", "-all"]


def why_permissions_cannot_be_tested() -> str | None:
    if os.geteuid() != 0:
        return None  # not root: permissions hold anyway
    if shutil.which("setpriv") is None:
        return "setpriv is not installed: cannot drop root's permission overrides"
    with tempfile.TemporaryDirectory() as folder:
        secret = Path(folder) / "secret"
        secret.write_text("x")
        secret.chmod(0)
        probe = subprocess.run([*NO_OVERRIDES, "cat", str(secret)], capture_output=True)
        if probe.returncode == 0:
            return "dropping CAP_DAC_OVERRIDE has no effect here: root still reads a mode-000 file"
    return None


def fill(mount: Path) -> None:
    """Write a filler file until the disk has no byte left."""
    descriptor = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (1 << 20, 1 << 12, 1):
            block = b"\0" * size
            while True:
                try:
                    os.write(descriptor, block)
                except OSError as error:
                    assert error.errno == errno.ENOSPC
                    break
    finally:
        os.close(descriptor)
