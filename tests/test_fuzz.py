"""Fuzzing the input side: any text or bytes give papers, an InputError, or InputWarnings
(never another exception), and IDs and handles do not depend on input order."""

import csv
import io
import json
import tempfile
import warnings
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recommender.errors import InputError
from recommender.corpus.handles import MAX_HANDLE_LEN, derive_handle, unique_handles
from recommender.corpus.papers import InputWarning, read_papers

FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Text that stresses the readers: paragraph breaks, quotes, commas, controls, non-ASCII.
text = st.text(st.one_of(st.sampled_from("\n\n\r\t ,;\"'{}[]:\\\x07\x1b\x85\x9b\u2028\ufeff"),
                         st.characters(min_codepoint=0, max_codepoint=0x2FFFF)), max_size=400)
# Lone surrogates, which st.text never makes and a JSON "\ud800" escape carries into a str.
surrogate_text = st.lists(st.one_of(text, st.sampled_from(["\ud800", "\udfff"])), max_size=4).map("".join)
word_text = st.text(st.one_of(st.sampled_from(" .,:-()"), st.characters(categories=["L", "N"])), min_size=1, max_size=120)
json_scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=40))
json_value = st.recursive(json_scalar, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                          max_leaves=8)
# Each field mostly well-formed (so records get far into the reader), sometimes anything.
record = st.fixed_dictionaries({}, optional={
    "id": st.one_of(st.text(max_size=12), st.integers(), json_value),
    "title": st.one_of(surrogate_text, json_value),
    "abstract": st.one_of(surrogate_text, surrogate_text, json_value),
    "authors": st.one_of(st.lists(surrogate_text, max_size=3), surrogate_text, json_value),
    "year": st.one_of(st.integers(0, 3000), st.integers(0, 3000).map(str), json_value),
    "venue": st.one_of(surrogate_text, json_value),
    "url": st.one_of(surrogate_text, json_value),
})


def read(name: str, data: bytes):
    """read_papers on one file: the papers, or None for an InputError; any other exception fails."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                papers = read_papers([path])
            except InputError as error:
                assert str(error) and "\n" not in str(error)
                papers = None
    assert all(issubclass(w.category, InputWarning) for w in caught), [str(w.message) for w in caught]
    if papers is not None:
        assert papers and len({p.id for p in papers}) == len(papers)
        assert len({p.handle.lower() for p in papers}) == len(papers)
        for paper in papers:
            assert paper.abstract.strip() and paper.text.encode("utf-8")
            assert 0 < len(paper.handle) <= MAX_HANDLE_LEN + 6
    return papers


@FUZZ
@given(st.binary(max_size=300), st.sampled_from(["p.txt", "p.jsonl", "p.csv", "p.json", "p.bib"]))
def test_any_bytes(data, name):
    read(name, data)


@FUZZ
@given(text, st.sampled_from(["p.txt", "p.jsonl", "p.csv", "p.json", "p.bib"]))
def test_any_text(content, name):
    read(name, content.encode("utf-8", "surrogatepass"))


@FUZZ
@given(st.lists(st.one_of(record, json_value), min_size=1, max_size=4))
def test_any_json_lines(rows):
    read("p.jsonl", "".join(json.dumps(row) + "\n" for row in rows).encode("utf-8", "surrogatepass"))


@FUZZ
@given(st.lists(st.sampled_from(["id", "title", "abstract", "authors", "year", "x"]), min_size=1, max_size=5),
       st.lists(st.lists(text, max_size=6), max_size=4))
def test_any_csv_rows(header, rows):
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    writer.writerows(rows)
    read("p.csv", out.getvalue().encode("utf-8", "surrogatepass"))


papers_strategy = st.lists(st.tuples(word_text, word_text), min_size=1, max_size=6)


@FUZZ
@given(papers_strategy, st.randoms(use_true_random=False))
def test_ids_and_handles_do_not_depend_on_input_order(rows, random):
    rows = [{"title": title, "abstract": abstract} for title, abstract in rows]
    shuffled = list(rows)
    random.shuffle(shuffled)

    def identities(order):
        papers = read("p.jsonl", "".join(json.dumps(row) + "\n" for row in order).encode("utf-8"))
        return None if papers is None else {(p.title, p.abstract): (p.id, p.handle) for p in papers}

    assert identities(rows) == identities(shuffled)


@FUZZ
@given(text, text)
def test_handles_are_short_deterministic_and_clean(title, abstract):
    handle = derive_handle(title, abstract)
    assert handle == derive_handle(title, abstract)
    assert 0 < len(handle) <= MAX_HANDLE_LEN
    assert handle == handle.strip() and "\n" not in handle


@FUZZ
@given(st.lists(st.text(st.sampled_from("aAbB-2ß"), min_size=1, max_size=4), max_size=8))
def test_unique_handles_are_unique_ignoring_case(handles):
    result = unique_handles(handles)
    assert len(result) == len(handles)
    assert len({h.lower() for h in result}) == len(result)
    assert all(new == old or new.startswith(f"{old}-") for old, new in zip(handles, result))


# Records that look like the bulk formats (so each reader is reached), with any values.
foreign = st.fixed_dictionaries({}, optional={
    "paperId": st.one_of(st.text(max_size=8), json_value), "externalIds": json_value,
    "authors": st.one_of(st.lists(st.fixed_dictionaries({"name": st.one_of(st.text(max_size=8), json_value)})), json_value),
    "abstract_inverted_index": st.one_of(st.dictionaries(st.text(max_size=6), st.lists(st.integers(-2, 20), max_size=3)),
                                         json_value),
    "id": st.one_of(st.just("https://openalex.org/W1"), st.text(max_size=8), json_value),
    "categories": st.one_of(st.text(max_size=12), json_value), "update_date": json_value, "versions": json_value,
    "authors_parsed": json_value, "type": json_value, "issued": json_value, "author": json_value,
    "DOI": json_value, "title": st.one_of(surrogate_text, json_value), "abstract": st.one_of(surrogate_text, json_value),
    "authorships": json_value, "primary_location": json_value, "publication_year": json_value,
})


@FUZZ
@given(st.lists(st.one_of(foreign, json_value), min_size=1, max_size=4), st.booleans())
def test_any_export_records(rows, as_lines):
    if as_lines:
        data = "".join(json.dumps(row) + "\n" for row in rows)
    else:
        data = json.dumps({"results": rows} if len(rows) % 2 else rows)
    read("p.json", data.encode("utf-8", "surrogatepass"))


bib_text = st.lists(st.one_of(text, st.sampled_from([
    "@article{k,", "@misc{k2, ", "title = {", "abstract = {", "author = {A and B}", "year = 20x", "}", "{", ",",
    "@string{s = \"v\"}", "journal = s", "\"", "$", "\\emph{", "\\", "@comment{", "%"])), max_size=12).map("".join)


@FUZZ
@given(bib_text)
def test_any_bibtex(content):
    read("p.bib", content.encode("utf-8", "surrogatepass"))
