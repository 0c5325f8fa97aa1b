"""Progress on stderr: phases, counts, rate and time left; quiet when asked or when work is short."""

import io

from corpus import write_corpus
from recommender.render.progress import ProgressReporter, duration


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def reporter(**kwargs):
    stream, clock = io.StringIO(), Clock()
    return ProgressReporter(stream=stream, clock=clock, is_terminal=False, **kwargs), stream, clock


def test_a_log_gets_a_line_per_phase_and_every_ten_seconds():
    progress, stream, clock = reporter()
    progress.phase("reading papers")
    clock.now = 2
    progress.phase("encoding", 8000)
    clock.now = 5
    progress.update(256, 8000)  # under 10 s since the phase began: no line
    clock.now = 14
    progress.update(2048, 8000)
    clock.now = 40
    progress.update(8000, 8000)
    progress.close()
    assert stream.getvalue() == (
        "reading papers...\n"
        "reading papers: 2s\n"
        "encoding: 8,000 papers...\n"
        "encoding: 2,048/8,000 papers, 170.7/s, about 35s left\n"
        "encoding: 8,000 papers in 38s\n"
    )


def test_the_time_left_counts_the_first_batch():
    progress, stream, clock = reporter()
    progress.phase("encoding", 1000)
    clock.now = 20  # the model took 15 s to load, then the first 100 papers took 5 s
    progress.update(100)
    assert stream.getvalue().splitlines()[-1] == "encoding: 100/1,000 papers, 5.0/s, about 3m 00s left"


def test_a_terminal_gets_one_live_line():
    stream, clock = io.StringIO(), Clock()
    progress = ProgressReporter(stream=stream, clock=clock, is_terminal=True)
    progress.phase("related work", 300)
    clock.now = 1
    progress.update(100)
    progress.close()
    assert stream.getvalue() == (
        "\r\x1b[2Krelated work: 0/300 papers"
        "\r\x1b[2Krelated work: 100/300 papers, 100.0/s, about 2s left"
        "\r\x1b[2Krelated work: 100 papers in 1s\n"
    )


def test_short_work_and_quiet_stay_silent():
    progress, stream, clock = reporter(min_total=100)
    progress.phase("reading papers")
    progress.phase("encoding", 6)
    progress.update(6)
    progress.close()
    quiet, quiet_stream, _ = reporter(quiet=True)
    quiet.phase("encoding", 5000)
    quiet.update(5000)
    quiet.close()
    assert stream.getvalue() == quiet_stream.getvalue() == ""


def test_durations():
    assert [duration(s) for s in (0.4, 59, 61, 3599, 3600, 7800)] == ["0s", "59s", "1m 01s", "59m 59s", "1h 00m", "2h 10m"]


def test_a_long_build_reports_its_phases(run, workdir):
    papers = [{"id": f"p{i}", "title": f"Paper {i}", "abstract": f"Words about topic {i} and {i % 7} things."}
              for i in range(120)]
    write_corpus(workdir / "in", papers)
    result = run("build", "in")
    assert result.exit_code == 0
    lines = result.stderr.splitlines()
    assert lines[0] == "encoding: 120 papers..."
    assert lines[1].startswith("encoding: 120 papers in ")
    assert [line.split(":")[0].rstrip(".") for line in lines[2:]] == [
        "building the flat search index", "building the flat search index", "TF-IDF", "TF-IDF", "checksums", "checksums"]
    assert run("build", "in", "--quiet").stderr == ""


def test_duplicates_are_summarised_once(run, workdir):
    abstract = "A paper about graph sparsification and spectral methods."
    for name in ("a", "b", "c"):
        (workdir / f"{name}.txt").write_text(f"Heading\n\n{abstract}\n\nOther {name} paper about things.\n", encoding="utf-8")
    result = run("build", "a.txt", "b.txt", "c.txt")
    assert result.stderr == "warning: 2 duplicate papers kept once (--verbose lists them)\n"
    verbose = run("build", "a.txt", "b.txt", "c.txt", "--verbose")
    assert verbose.stderr == (
        "warning: b.txt:3: same paper as a.txt:3; kept once\n"
        "warning: c.txt:3: same paper as a.txt:3; kept once\n"
    )
