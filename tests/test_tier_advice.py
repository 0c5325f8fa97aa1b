"""`papers build` points a conference-sized first build with the default model to the quality tier,
with what it buys and its projected cost, and stays silent otherwise (the fake encoder: no
model)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from corpus import write_corpus

from recommender.embed import models
from recommender.embed.models import QUALITY_HINT_PAPERS, tier_advice
from recommender.index.build import build_index

LOW, HIGH = QUALITY_HINT_PAPERS
ADVICE = ("a corpus this size may be better served by the quality tier: "
          "rebuild with --model all-mpnet-base-v2")


def conference(count: int) -> list[dict]:
    return [{"id": f"c{i:05d}", "title": f"Paper {i}",
             "abstract": f"c{i:05d} results on topic {i % 37}."} for i in range(count)]


@pytest.fixture(scope="module")
def conference_file(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("conference"), conference(LOW))


def advice_lines(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("a corpus this size")]


def test_a_first_conference_sized_build_names_the_quality_tier_once(papers_cli, conference_file):
    first = papers_cli("build", str(conference_file))
    assert first.exit_code == 0
    assert first.stdout == (f"indexed {LOW} papers in indexes/default: encoded {LOW}, "
                            "reused 0 from the cache (flat search)\n")
    rate, measured = models.model_facts("all-mpnet-base-v2").build_rate
    minutes = LOW / rate
    [line] = advice_lines(first)
    assert line.startswith(
        f"{ADVICE} (42.6 against 40.6 MAP, 63.6 against 61.0 NDCG%20 on held-out CSFCube "
        "queries; about ")
    cost = re.search(r"; about (a minute|\d+ min) of encoding on 2 idle CPU cores, at the "
                     r"([\d,]+) papers a minute measured building ([\d,]+) papers, longer on a "
                     r"busy machine", line)
    assert cost is not None
    assert cost[1] == ("a minute" if minutes < 1.5 else f"{round(minutes)} min")
    assert (cost[2], cost[3]) == (f"{rate:,.0f}", f"{measured:,}")
    assert first.stderr.rstrip("\n").endswith(line)  # the last line, after the summary
    # A rebuild of the index (its papers changed or not) is not its first build.
    assert advice_lines(papers_cli("build", str(conference_file))) == []


def test_small_corpora_chosen_models_and_quiet_builds_get_no_advice(papers_cli, workdir,
                                                                    conference_file):
    write_corpus(workdir / "small")
    small = papers_cli("build", "small", "--index", "small")
    assert small.exit_code == 0 and advice_lines(small) == []
    chosen = papers_cli("build", str(conference_file), "--index", "chosen",
                        "--model", "all-MiniLM-L6-v2")
    assert chosen.exit_code == 0 and advice_lines(chosen) == []
    quiet = papers_cli("build", str(conference_file), "--index", "quiet", "--quiet")
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_the_library_reports_the_facts_not_the_wording(workdir, fake_model, conference_file):
    advice = build_index([conference_file], index="lib").advice
    assert advice is not None and "--" not in repr(advice.to_dict())
    assert advice.to_dict()["held_out"] == {"map": 42.6, "ndcg_pct_20": 63.6}
    assert advice.to_dict()["instead_of"] == {"map": 40.6, "ndcg_pct_20": 61.0}
    assert build_index([conference_file], index="lib").advice is None  # a rebuild


def test_the_advice_covers_conference_sizes_with_the_default_model_only():
    assert tier_advice("all-MiniLM-L6-v2", LOW - 1) is None
    quality = models.model_facts("all-mpnet-base-v2")
    advice = tier_advice("all-MiniLM-L6-v2", LOW)
    assert advice.minutes == pytest.approx(LOW / quality.build_rate[0])
    assert (advice.papers_per_minute, advice.measured_papers) == quality.build_rate
    assert tier_advice("all-MiniLM-L6-v2", HIGH) is not None
    assert tier_advice("all-MiniLM-L6-v2", HIGH + 1) is None
    for model in ("static", "all-mpnet-base-v2", "./my-model"):
        assert tier_advice(model, LOW) is None


def test_models_shows_each_tiers_speed_and_projected_build_times(papers_cli):
    listed = json.loads(papers_cli("models", "--format", "json").stdout)
    listed = {model["name"]: model for model in listed}
    for name in ("all-MiniLM-L6-v2", "static", "all-mpnet-base-v2"):
        facts = models.model_facts(name)
        rate = facts.encoding_rate  # a whole build's rate where one was measured
        assert listed[name]["papers_per_minute"] == rate > 0
        assert listed[name]["projected_minutes"] == {"5000": round(5_000 / rate, 2),
                                                     "1000000": round(1_000_000 / rate, 2)}
        measured_on = models.BUILDS_MEASURED_ON if facts.build_rate else models.MEASURED_ON
        assert listed[name]["measured_on"] == measured_on
    table = papers_cli("models").stdout
    assert table.splitlines()[0].split()[6:10] == ["papers/min", "5,000", "papers", "1M"]
    assert "the build times are projections from it" in table.splitlines()[-1]
    # The rates and projected times shown are docs/models.md's table's, figure for figure.
    docs = (Path(__file__).resolve().parents[1] / "docs" / "models.md").read_text(encoding="utf-8")
    documented = {cells[0]: cells[3:6] for line in docs.splitlines() if line.startswith("| ")
                  for cells in [[cell.strip() for cell in line.strip("|").split("|")]]
                  if cells[0] in listed}
    shown = {cells[0]: cells[6:9] for line in table.splitlines()[1:]
             for cells in [re.split(r"\s{2,}", line.strip())] if cells[0] in listed}
    assert shown == documented and len(shown) == 3, (shown, documented)
