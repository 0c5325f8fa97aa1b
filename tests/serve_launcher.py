"""Test-only `papers` launcher for `papers serve`: the real CLI, server and worker processes, with
tests/fakes.py's FakeEncoder for every query (PAPERS_TEST_REAL_MODEL=1 keeps the real model), and the
map projected by PCA, not UMAP (whose first run compiles for a minute).

    python tests/serve_launcher.py serve --index x --port 0 [--workers 2]

The patch runs at import, so uvicorn's worker processes (spawned: they import this file as their
__main__) get it too."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

if os.environ.get("PAPERS_TEST_REAL_MODEL") != "1":
    from fakes import FakeEncoder
    from recommender.query import recommender as query

    query.load_query_encoder = lambda stored, model: FakeEncoder(name=model)
    sys.modules["umap"] = None  # reading.layout then projects by PCA

from recommender import cli  # noqa: E402

if __name__ == "__main__":
    cli.main()
