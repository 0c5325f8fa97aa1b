"""A build streams its papers (spooled to disk, read back a chunk at a time;
vectors and TF-IDF postings on disk), so its memory stays flat in the corpus size, and its index
files do not depend on the chunk size."""

import json
import random
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, SEEDS

TESTS = Path(__file__).resolve().parent


def seed_words() -> list[str]:
    from recommender.corpus.papers import read_papers

    return sorted({word for paper in read_papers([SEEDS]) for word in paper.abstract.split()})


def write_papers(path: Path, count: int, words: list[str] | None = None) -> Path:
    """`count` papers of seed words, with what the build has to handle: the same text twice, papers
    without an ID or a title, arXiv and DOI links (the identifier table), authors and years (citation keys)."""
    words = words or seed_words()
    generator = random.Random(count)
    lines = []
    for number in range(count):
        abstract = " ".join(generator.choices(words, k=generator.randint(20, 90)))
        paper = {"title": " ".join(generator.choices(words, k=generator.randint(0, 8))), "abstract": abstract,
                 "authors": [f"Author {generator.randrange(50)}"], "year": 2000 + number % 25}
        if number % 5:
            paper["id"] = f"p{number:05d}"
        if number % 7 == 0:
            paper["url"] = f"https://arxiv.org/abs/2401.{number:05d}"
        elif number % 11 == 0:
            paper["url"] = f"https://doi.org/10.1000/x{number}"
        lines.append(json.dumps(paper))
        if number % 97 == 3:  # the same paper again, under another ID: kept once
            lines.append(json.dumps({**paper, "id": f"again{number}"}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def stored_files(index_dir: Path) -> dict[str, str]:
    version = (index_dir / "CURRENT").read_text().split()[0]
    return {name: entry["sha256"] for name, entry in
            json.loads((index_dir / version / "manifest.json").read_text())["files"].items()}


def build(corpus: Path, index: Path, **options):
    from recommender import build_index

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the duplicates
        return build_index([corpus], index, **options)


@pytest.mark.parametrize("kind", ["flat", "ivf"])
def test_a_build_streamed_in_tiny_chunks_writes_the_same_files_as_one_chunk(workdir, fake_model, kind):
    corpus = write_papers(workdir / "in" / "papers.jsonl", 400)
    tiny = build(corpus, workdir / "tiny", index_type=kind, chunk_size=7)
    whole = build(corpus, workdir / "whole", index_type=kind, chunk_size=10**9)
    assert tiny.papers == whole.papers == 400 + 4 - 4  # four texts twice, kept once
    assert tiny.index_kind == kind
    files = stored_files(workdir / "tiny")
    assert {"vectors.npy", "faiss.index", "papers.jsonl", "lexical/csc_data.npy", "keys/ids_rows.npy"} <= set(files)
    assert files == stored_files(workdir / "whole")
    assert not list((workdir / "tiny").rglob(".scratch")) and not list((workdir / "tiny").rglob("*.tmp-*"))


def test_the_streamed_index_holds_what_the_in_memory_functions_make(workdir, fake_model, open_index):
    """The arrays the functions that hold everything make (the code before streaming), read back."""
    import faiss

    from recommender.corpus.citation import citation_key
    from recommender.corpus.identifiers import work_identifier
    from recommender.corpus.papers import read_papers, text_key
    from recommender.embed.windows import Chunking, embed_texts
    from recommender.index.layout import COLUMN_MAX, FAISS, KEY_ARRAYS, PAPERS, VECTORS, VOCABULARY
    from recommender.index.stored import open_stored
    from recommender.index.ann import build_faiss_index, choose_index
    from recommender.index.build import inputs_fingerprint
    from recommender.index.keys import key_arrays
    from recommender.index.lexical import build_tfidf

    corpus = write_papers(workdir / "in" / "papers.jsonl", 300)
    build(corpus, workdir / "index", index_type="ivf", chunk_size=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        papers = read_papers([corpus])
    texts = [paper.text for paper in papers]
    vectors = embed_texts(fake_model, texts, Chunking(), heads=[paper.head for paper in papers]).vectors
    lexical, vocabulary, _ = build_tfidf(texts)
    keys = key_arrays([p.id for p in papers], [p.handle for p in papers], (text_key(p.title, p.abstract) for p in papers),
                      (work_identifier(p.url, p.id) for p in papers), [citation_key(p) for p in papers])
    faiss_index = build_faiss_index(vectors, choose_index(len(papers), vectors.shape[1], "ivf"))
    with open_stored(workdir / "index", verify=True) as stored:
        assert np.array_equal(stored.load_array(VECTORS), vectors)
        for name, array in lexical.items():
            path = COLUMN_MAX if name == "column_max" else f"lexical/{name}.npy"
            assert stored.load_array(path).tobytes() == array.tobytes(), name
        assert stored.load_json(VOCABULARY) == vocabulary
        for name in KEY_ARRAYS:
            assert np.array_equal(stored.load_array(f"keys/{name}.npy"), keys[name]), name
        assert stored.path(FAISS).read_bytes() == faiss.serialize_index(faiss_index).tobytes()
        assert [json.loads(line) for line in stored.path(PAPERS).read_text().splitlines()] == \
            [paper.to_dict(stored=True) for paper in papers]  # as an index stores them
        assert stored.manifest["inputs_fingerprint"] == inputs_fingerprint(papers)
    index = open_index(str(workdir / "index"))
    assert [p.handle for p in index.papers()] == [p.handle for p in papers]


MEASURE = """
import json, sys, tracemalloc, warnings
sys.path.insert(0, {tests!r})
from fakes import FakeEncoder
from recommender.embed import loading
from recommender.index import ann, build


class Forgetful(FakeEncoder):
    def encode(self, texts):
        self.encoded_texts = []  # the fake keeps every text otherwise
        return super().encode(texts)


encoder = Forgetful()
loading.load_encoder = lambda model, device="auto": encoder
build.prepare_query_encoder = lambda model, writer, previous, on_phase=None, precision="fp32": None
ann.ADD_BATCH = 256  # the vectors FAISS is given at a time, whatever the corpus
warnings.simplefilter("ignore")
tracemalloc.start()
build.build_index([sys.argv[1]], sys.argv[2], model="fake", chunk_size=256)  # buffers of 256
print(json.dumps(tracemalloc.get_traced_memory()[1]))
"""


def test_a_build_holds_far_less_than_a_kilobyte_a_paper_more(tmp_path):
    """Peak memory allocated through Python (numpy arrays included; FAISS's own, in C++, not) of a
    whole build at 800 and at 3,200 papers (~420 characters, 256-d vectors: 1 KB a vector), with
    buffers of 256 papers, postings and vectors (by default thousands, a fixed cost): the papers,
    their vectors and their postings are never all held, so a paper costs far less."""
    words = seed_words()
    peaks = {}
    for count in (800, 3200):
        corpus = write_papers(tmp_path / f"in-{count}" / "papers.jsonl", count, words)
        out = subprocess.run([sys.executable, "-c", MEASURE.format(tests=str(TESTS)), str(corpus), str(tmp_path / f"i{count}")],
                             capture_output=True, text=True, cwd=REPO)
        assert out.returncode == 0, out.stderr
        peaks[count] = json.loads(out.stdout)
    per_paper = (peaks[3200] - peaks[800]) / 2400
    assert per_paper < 600, f"{per_paper:.0f} bytes a paper"
