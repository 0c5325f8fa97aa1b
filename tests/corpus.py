"""A tiny corpus with clear topics, written through the same formats users give."""

import json
from pathlib import Path

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
