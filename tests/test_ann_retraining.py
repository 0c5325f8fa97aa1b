"""An approximate (IVF) index grows with appended papers and is retrained when the corpus changes
or grows much."""

import numpy as np

from corpus import synthetic_papers
from corpus import write_papers_jsonl as write
from recommender import build_index
from recommender.index.build import RETRAIN_GROWTH


def test_appended_papers_extend_the_trained_index(open_index, workdir, fake_model):
    base = write(workdir / "base.jsonl", synthetic_papers(0, 400))
    build_index([base], index_type="ivf")
    first = open_index().manifest["index"]
    assert (first["kind"], first["trained_on"]) == ("ivf", 400)

    extra = write(workdir / "extra.jsonl", synthetic_papers(400, 4))
    report = build_index([base, extra], index_type="ivf")
    assert (report.papers, report.encoded, report.reused) == (404, 4, 400)
    grown = open_index()
    assert grown.manifest["index"]["trained_on"] == 400  # extended, not retrained
    assert grown.faiss_index.ntotal == 404
    # The appended papers are in the extended index: each is found from its own text and vector.
    from recommender.index.ann import search_index

    appended = [grown.resolve(f"p{i:05d}") for i in range(400, 404)]
    _, found = search_index(grown.faiss_index, np.asarray(grown.vectors[appended]), 1)
    assert found[:, 0].tolist() == appended
    for paper in grown.papers_at(appended):
        assert grown.search(paper.text, k=1, mode="dense")[0].id == paper.id


def test_changed_or_much_larger_corpus_is_retrained(open_index, workdir, fake_model):
    base = write(workdir / "base.jsonl", synthetic_papers(0, 300))
    build_index([base], index_type="ivf")
    bigger = write(workdir / "bigger.jsonl", synthetic_papers(300, int(300 * RETRAIN_GROWTH)))
    build_index([base, bigger], index_type="ivf")
    assert open_index().manifest["index"]["trained_on"] == 300 + int(300 * RETRAIN_GROWTH)
    reordered = write(workdir / "reordered.jsonl", synthetic_papers(0, 300)[::-1])
    build_index([reordered], index_type="ivf")
    assert open_index().manifest["index"]["trained_on"] == 300
