"""A tiny corpus with clear topics, written through the same formats users give."""

import json
from pathlib import Path

import numpy as np

PAPERS = [
    {"id": "dp1", "title": "FlashDP: Fast Private Training",
     "abstract": "Differentially private training of large language models with fused per-sample gradient clipping. "
                 "Code at https://github.com/lab/flashdp."},
    {"id": "dp2", "title": "Private Fine-Tuning",
     "abstract": "Differentially private fine-tuning of language models with low memory gradient clipping."},
    {"id": "vid1", "title": "VADB: Video Aesthetics",
     "abstract": "A video aesthetic assessment database with professional annotations and a dual-modal network."},
    {"id": "vid2", "title": "Video Quality Models",
     "abstract": "Video quality assessment models trained on aesthetic annotations of short videos."},
    {"id": "rnn1", "title": "TFLA: Tiled Flash Linear Attention",
     "abstract": "Linear recurrent networks with gating and fast kernels for long sequence language modeling."},
    {"id": "rnn2", "title": "Gated Linear RNNs",
     "abstract": "Gated linear recurrent networks compete with transformers for sequence modeling with fast kernels."},
]

# The same papers under arXiv-like IDs, so that IDs have real unique prefixes.
LONG_IDS = {"dp1": "arXiv.2401.00117", "dp2": "arXiv.2401.00254", "vid1": "arXiv.2402.00031",
            "vid2": "arXiv.2402.10042", "rnn1": "arXiv.2403.00051", "rnn2": "arXiv.2403.00066"}


def long_id_papers():
    return [{**paper, "id": LONG_IDS[paper["id"]]} for paper in PAPERS]


def write_corpus(folder: Path, papers=PAPERS, name: str = "papers.jsonl") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(json.dumps(paper) + "\n" for paper in papers), encoding="utf-8")
    return path


# Papers whose every field tries to run a script in a page that shows it, or to reach a file through its ID
# (`papers serve`'s browser tests: none may run, whatever page shows them).
ATTACK = "</script><script>window.attacked = 1</script><!--"
HOSTILE_PAPERS = [
    {"id": "x<script>window.attacked=2</script>", "title": "<img src=x onerror='window.attacked=3'> & co",
     "abstract": "Differentially private training " + ATTACK + " of language models with gradient clipping.",
     "authors": ["<b onmouseover='window.attacked=4'>Mallory</b>", "Eve \"quote' <i>"],
     "url": "javascript:window.attacked = 5", "venue": "<svg onload='window.attacked=6'>", "year": 2024,
     "categories": ["<script>window.attacked=16</script>", "cs.LG"]},
    {"id": "../../../etc/passwd", "title": "\"><svg/onload=window.attacked=7> {{7*7}} ${7*7}",
     "abstract": "Differentially private fine-tuning with low memory: <style>body{display:none}</style> "
                 "<a href=\"javascript:window.attacked=8\">click</a> Code at https://github.com/lab/x\"onclick=\"window.attacked=9",
     "url": "data:text/html,<script>window.attacked=10</script>"},
    {"id": "quote'\"&amp;#x27;", "title": "Video \u202egnp.exe\u202c aesthetics </textarea></title><script>window.attacked=11</script>",
     "abstract": "A video aesthetic assessment database <iframe src=\"javascript:window.attacked=12\"></iframe> with annotations.",
     "url": "https://example.org/?q=<script>window.attacked=13</script>&x=\"'"},
    {"id": "plain-1", "title": "Video Quality Models",
     "abstract": "Video quality assessment models trained on aesthetic annotations of short videos."},
    {"id": "plain-2", "title": "Gated Linear RNNs",
     "abstract": "Gated linear recurrent networks <script>window.attacked=14</script> compete with transformers."},
    {"id": "%2e%2e%2fsecret", "title": "TFLA: Tiled Flash Linear Attention",
     "abstract": "Linear recurrent networks with gating and fast kernels for long sequence language modeling. "
                 "<meta http-equiv=\"refresh\" content=\"0;url=javascript:window.attacked=15\">"},
]


# Three topics of eight (or more) papers each, with words of their own.
TOPICS = {
    "privacy": "differential privacy private gradient clipping noise budget membership federated",
    "video": "video aesthetic frames temporal quality annotation clips motion camera",
    "graphs": "graph spanner shortest path tree vertex edge decomposition planar",
}


def topic_papers(per_topic=8):
    papers = []
    for topic, words in sorted(TOPICS.items()):
        words = words.split()
        for number in range(per_topic):
            picked = [words[(number * 3 + step) % len(words)] for step in range(6)]
            papers.append({
                "id": f"{topic}-{number}",
                "title": f"{picked[0].title()} {picked[1]} {number}",
                "abstract": f"We study {topic} with {' and '.join(picked)}. The method uses {words[0]} {words[1]}.",
            })
    return papers


# Papers of random words, for corpora of hundreds.
WORDS = ("graph neural network privacy gradient video aesthetic kernel attention sparse matrix robot policy "
         "reward language model speech audio image diffusion protein molecule theorem bound convex").split()


def synthetic_papers(start: int, count: int) -> list[dict]:
    rng = np.random.default_rng(start)
    return [
        {"id": f"p{i:05d}", "title": f"Paper {i}", "abstract": " ".join(rng.choice(WORDS, size=30))}
        for i in range(start, start + count)
    ]


def write_papers_jsonl(path, papers):
    path.write_text("".join(json.dumps(p) + "\n" for p in papers), encoding="utf-8")
    return path


# Two topics' words; the papers of each topic, and four between them (the profile tests).
PRIVACY = "differential privacy private gradient clipping noise budget membership federated accountant"
VIDEO = "video aesthetic frames temporal quality annotation clips motion camera footage"


def two_topic_papers():
    """Six papers on each topic (most of its words each), and four that mix the two: the space between."""
    papers = []
    for name, words in (("privacy", PRIVACY.split()), ("video", VIDEO.split())):
        for number in range(6):
            picked = [word for i, word in enumerate(words) if i != number % len(words)]
            papers.append({"id": f"{name}-{number}", "title": f"{picked[0].title()} {picked[1]} {number}",
                           "abstract": " ".join(picked) + "."})
    for number in range(4):
        mixed = PRIVACY.split()[number: number + 5] + VIDEO.split()[number: number + 5]
        papers.append({"id": f"between-{number}", "title": f"{mixed[0].title()} {mixed[5]} {number}",
                       "abstract": " ".join(mixed) + "."})
    return papers


# Two seeds of each topic.
TWO_TOPIC_SEEDS = ("privacy-0", "privacy-1", "video-0", "video-1")
