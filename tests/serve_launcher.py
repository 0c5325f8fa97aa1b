"""Test-only `papers` launcher for `papers serve`: the real CLI, server and worker processes, with
tests/fakes.py's FakeEncoder for every query (PAPERS_TEST_REAL_MODEL=1 keeps the real model), and the
map projected by PCA, not UMAP (whose first run compiles for a minute).

With PAPERS_TEST_HOOKS=1, a search for "sleep:N" takes N seconds and one for "explode" raises an
unexpected error (a RuntimeError), PAPERS_TEST_SLOW_MAP=N makes drawing the map take N seconds more, and
PAPERS_TEST_SLOW_PROJECTION=N projecting its papers (as UMAP does at thousands of papers), and
PAPERS_TEST_SLOW_PLAN_PAGE=N:FOLDER rendering a reading-group plan into a page (as at thousands of
papers), writing FOLDER/started and FOLDER/finished around it: what the server's tests need of a slow
or broken request.

    python tests/serve_launcher.py serve --index x --port 0 [--workers 2]

The patch runs at import, so uvicorn's worker processes (spawned: they import this file as their
__main__) get it too."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

if os.environ.get("PAPERS_TEST_REAL_MODEL") != "1":
    from fakes import FakeEncoder
    from recommender.query import paper_index as query

    class HookedEncoder(FakeEncoder):
        def encode(self, texts):
            import time

            for text in texts:
                if text.startswith("sleep:"):
                    time.sleep(float(text.split(":", 1)[1]))
                elif text == "explode":
                    raise RuntimeError("a test's unexpected error")
            return super().encode(texts)

    hooked = os.environ.get("PAPERS_TEST_HOOKS") == "1"
    query.load_query_encoder = lambda stored, model: (HookedEncoder if hooked else FakeEncoder)(name=model)
    sys.modules["umap"] = None  # reading.layout then projects by PCA
    sys.modules["openTSNE"] = None

if os.environ.get("PAPERS_TEST_SLOW_MAP"):
    from recommender.reading import layout

    def slow_build_map(*args, _build=layout.build_map, **options):
        import time

        time.sleep(float(os.environ["PAPERS_TEST_SLOW_MAP"]))
        return _build(*args, **options)

    layout.build_map = slow_build_map

if os.environ.get("PAPERS_TEST_SLOW_PROJECTION"):
    from recommender.reading import layout

    def slow_projection(*args, _project=layout.project_2d, **options):
        import time

        time.sleep(float(os.environ["PAPERS_TEST_SLOW_PROJECTION"]))
        return _project(*args, **options)

    layout.project_2d = slow_projection

if os.environ.get("PAPERS_TEST_SLOW_PLAN_PAGE"):
    import jinja2

    def slow_plan_render(self, *args, _render=jinja2.Template.render, **context):
        if "plan" not in context:
            return _render(self, *args, **context)
        import time

        seconds, folder = os.environ["PAPERS_TEST_SLOW_PLAN_PAGE"].split(":", 1)
        (Path(folder) / "started").touch()
        time.sleep(float(seconds))
        page = _render(self, *args, **context)
        (Path(folder) / "finished").touch()
        return page

    jinja2.Template.render = slow_plan_render

from recommender import cli  # noqa: E402

if __name__ == "__main__":
    cli.main()
