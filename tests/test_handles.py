"""Handles for the seed abstracts, title handles, disambiguation and code links."""

import subprocess
import sys
from pathlib import Path

import pytest

from recommender.corpus.handles import (
    MAX_HANDLE_LEN,
    derive_handle,
    extract_code_links,
    unique_handles,
)

SEEDS = Path(__file__).resolve().parent.parent / "seeds"


def seed_abstracts():
    """The 38 seed abstracts in file order, read by the project's own reader."""
    from recommender.corpus.papers import read_papers

    return [paper.abstract for paper in read_papers([SEEDS])]


# (start of the abstract, handle a human would use); in seed-file order.
SEED_HANDLES = [
    ("As large language models (LLMs) increasingly underpin", "FlashDP"),
    ("Video aesthetic assessment, a vital area", "VADB"),
    ("Linear RNNs with gating recently", "TFLA"),
    ("In-Context Reinforcement Learning (ICRL) enables", "AnyMDP"),
    ("Traditional continuous deep reinforcement learning", "Distance-based diversity regularization"),
    ("We analyse how the sampling dynamics", "Cross-fluctuations"),
    ("Estimating the geometric median", "Estimating the geometric median"),
    ("Kolmogorov-Arnold Networks (KANs)", "LipKANs"),
    ("World models aim to capture", "Dyn-O"),
    ("This paper introduces PaZO", "PaZO"),
    ("Large language models (LLMs) are powerful tools", "BenchmarkCards"),
    ("Recent research has increasingly focused on reconciling", "ACM"),
    ("Online bipartite matching is", "Online bipartite matching"),
    ("Visual processing starts in the outer retina", "Outer retina model"),
    ("Physiological signals are often corrupted", "PhysioWave"),
    ("Recently, there has been significant progress in learning-based diffusion samplers", "NAAS"),
    ("We present a theoretical framework showing", "KLDO"),
    ("Diffusion-based generative models struggle", "AlignedGen"),
    ("Target speaker extraction focuses", "Target speaker extraction"),
    ("When serving a single base LLM", "Block-diagonal LoRA"),
    ("Diffusion models have demonstrated remarkable generative", "StreamFlow"),
    ("Knowledge distillation is a model compression", "PLD"),
    ("Thompson sampling (TS) is", "Thompson sampling"),
    ("While reinforcement learning (RL) over chains of thought", "ViGoRL"),
    ("Performative prediction is a framework", "Affine Risk Minimizers"),
    ("With the rapid development of artificial intelligence", "DataSIR"),
    ("Audio-driven human animation methods", "MultiTalk"),
    ("Chain-of-Thought (CoT) enhances", "SemCoT"),
    ("With increasing regulations on private data", "RUAGO"),
    ("Aligning large language models (LLMs) with human preferences", "SGPO"),
    ("Diffusion models have demonstrated remarkable success", "SPARKE"),
    ("We study the value of stochastic predictions", "Value of stochastic predictions"),
    ("Biological sensorimotor systems", "MultiBarrelModel"),
    ("Recent Graphical User Interface (GUI) agents", "GUI-G1"),
    ("Circuit discovery has gradually become", "Circuit discovery"),
    ("Personalized alignment is essential", "RLPA"),
    ("Conformal prediction provides", "Conformal prediction"),
    ("Large Reasoning Models (LRMs) have significantly", "Thinking draft faithfulness"),
]


def test_seed_table_covers_every_seed_abstract_in_order():
    abstracts = seed_abstracts()
    assert len(abstracts) == 38
    assert [a.startswith(start) for a, (start, _) in zip(abstracts, SEED_HANDLES)] == [True] * 38


@pytest.mark.parametrize("start,expected", SEED_HANDLES, ids=[h for _, h in SEED_HANDLES])
def test_seed_handle(start, expected):
    (abstract,) = [a for a in seed_abstracts() if a.startswith(start)]
    assert derive_handle("", abstract) == expected


def test_seed_handles_are_unique_short_and_clean():
    handles = [derive_handle("", a) for a in seed_abstracts()]
    assert len({h.lower() for h in handles}) == len(handles) == 38
    assert unique_handles(handles) == handles
    for handle in handles:
        assert 1 <= len(handle) <= MAX_HANDLE_LEN
        assert handle == handle.strip() and handle[-1].isalnum()
        assert not any(c in handle for c in "\\$*{}()[]")


def test_same_handles_and_links_in_every_process():
    """Handles are stored in the index and typed by users: they must not depend on string hashing
    (set or dict order), which changes from one Python process to the next."""
    import json
    import os

    code = (
        "import json, sys\n"
        "from recommender.corpus.handles import derive_handle, extract_code_links, unique_handles\n"
        "from recommender.corpus.papers import read_papers\n"
        f"abstracts = [p.abstract for p in read_papers([{str(SEEDS)!r}])]\n"
        "handles = [derive_handle('', a) for a in abstracts]\n"
        "print(json.dumps([handles, unique_handles(handles + ['x', 'X', 'x-2', 'X']),\n"
        "                  [list(extract_code_links(a)) for a in abstracts]]))\n"
    )
    outputs = []
    for hash_seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed,
               "PYTHONPATH": os.pathsep.join([str(SEEDS.parent), os.environ.get("PYTHONPATH", "")])}
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        outputs.append(json.loads(done.stdout))
    abstracts = seed_abstracts()
    handles = [derive_handle("", a) for a in abstracts]
    here = [handles, unique_handles(handles + ["x", "X", "x-2", "X"]), [list(extract_code_links(a)) for a in abstracts]]
    assert outputs == [here] * 3


@pytest.mark.parametrize(
    "title,expected",
    [
        ("FlashDP: Memory-Efficient and High-Throughput DP-SGD Training for LLMs", "FlashDP"),
        ("Dyn-O: Building Structured World Models with Object-Centric Representations", "Dyn-O"),
        ("BERT -- Pre-training of Deep Bidirectional Transformers", "BERT"),
        ("$\\texttt{SemCoT}$: Accelerating Chain-of-Thought Reasoning", "SemCoT"),
        ("An Image is Worth 16x16 Words: Transformers for Image Recognition at Scale",
         "An Image is Worth 16x16 Words"),
        ("Attention Is All You Need", "Attention Is All You Need"),
        ("Language Models are Few-Shot Learners.", "Language Models are Few-Shot Learners"),
        ("Deep Residual Learning for Image Recognition", "Deep Residual Learning"),
        ("Efficient Estimation of Word Representations in Vector Space", "Efficient Estimation"),
        ("Position: The Most Expensive Part of an LLM should be its Training Data",
         "The Most Expensive Part"),
        ("A Very Long Title Without Any Cut Words Whatsoever Supercalifragilistic", "A Very Long Title"),
        ("Scaling Laws?", "Scaling Laws"),
    ],
)
def test_handle_from_title(title, expected):
    assert derive_handle(title, "This paper introduces OtherName, a method.") == expected


def test_title_wins_over_abstract_and_blank_title_falls_back():
    abstract = "This paper introduces FlashDP, a cache-friendly DP-SGD."
    assert derive_handle("Fast Private Training", abstract) == "Fast Private Training"
    assert derive_handle("   ", abstract) == "FlashDP"
    assert derive_handle(None, abstract) == "FlashDP"


@pytest.mark.parametrize(
    "abstract,expected",
    [
        # no named thing: a short phrase from the first sentence
        ("Graph neural networks are widely used in chemistry. We study oversmoothing.",
         "Graph neural networks"),
        ("Sparse autoencoders (SAEs) decompose activations into features.", "Sparse autoencoders"),
        ("This work studies the convergence of Adam under heavy-tailed noise.", "Convergence of Adam"),
        # named things and their cues
        ("In this paper, we propose a new method called Foo Bar Baz that works.", "Foo Bar Baz"),
        ("We present WizardNet-7B, a model for X.", "WizardNet"),
        ("Recently, diffusion models have achieved success. We present $\\textsc{DiffuBench}$, a benchmark.",
         "DiffuBench"),
        # generic acronyms that are only used are not handles
        ("Large language models (LLMs) are great. We introduce LLM-based agents with GPT-4.",
         "Large language models"),
        ("We propose a method that outperforms GhostClip and Opacus on CIFAR-10.", "Method"),
    ],
)
def test_handle_from_abstract(abstract, expected):
    assert derive_handle("", abstract) == expected


def test_empty_paper_gets_placeholder():
    assert derive_handle("", "") == "Untitled"


@pytest.mark.parametrize(
    "handles,expected",
    [
        ([], []),
        (["A", "B"], ["A", "B"]),
        (["StreamFlow", "StreamFlow"], ["StreamFlow", "StreamFlow-2"]),
        (["StreamFlow", "streamflow", "StreamFlow"], ["StreamFlow", "streamflow-2", "StreamFlow-3"]),
        # a generated name never takes one that appears later in the list
        (["A", "A", "A-2"], ["A", "A-3", "A-2"]),
        (["A-2", "A", "A"], ["A-2", "A", "A-3"]),
        (["A", "A", "A-2", "A-2"], ["A", "A-3", "A-2", "A-2-2"]),
    ],
)
def test_unique_handles(handles, expected):
    assert unique_handles(handles) == expected
    assert len({h.lower() for h in unique_handles(handles)}) == len(handles)


SEED_LINKS = {
    "This paper introduces FlashDP": ("https://github.com/kaustpradalab/flashdp",),  # trailing "."
    "Large language models (LLMs) are powerful tools": (  # no scheme, two links
        "https://github.com/SokolAnn/BenchmarkCards",
        "https://huggingface.co/datasets/ASokol/BenchmarkCards",
    ),
    "With the rapid development of artificial intelligence": (  # kaggle is not a code link
        "https://github.com/Fan-Mo-ZJU/DataSIR",
    ),
    "Diffusion models have demonstrated remarkable success": (  # markdown link, deduplicated
        "https://mjalali.github.io/SPARKE",
    ),
    "Target speaker extraction focuses": (  # " ." after the URL
        "https://github.com/xu-shitong/TSE-through-Positive-Negative-Enroll",
    ),
    "Chain-of-Thought (CoT) enhances": ("https://github.com/YinhanHe123/SemCoT",),  # trailing "/."
    "Knowledge distillation is a model compression": (),
}


@pytest.mark.parametrize("start", list(SEED_LINKS))
def test_seed_code_links(start):
    (abstract,) = [a for a in seed_abstracts() if a.startswith(start) or f" {start}" in a]
    assert extract_code_links(abstract) == SEED_LINKS[start]


@pytest.mark.parametrize(
    "text,expected",
    [
        ("see \\url{https://github.com/a/b}.", ("https://github.com/a/b",)),
        ("\\href{https://github.com/a/b}{code} and 50\\% faster", ("https://github.com/a/b",)),
        ("Code: https://github.com/a/b_c\\_d), and (github.com/x/y).",
         ("https://github.com/a/b_c_d", "https://github.com/x/y")),
        ("github.com/u/r\\%20x, 30\\%", ("https://github.com/u/r%20x",)),
        ("(https://gitlab.com/g/r), https://huggingface.co/org/model.", (
            "https://gitlab.com/g/r", "https://huggingface.co/org/model")),
        ("https://GitHub.com/a/b and https://github.com/a/b/ and github.com/a/b,",
         ("https://github.com/a/b",)),
        ("project page https://team.github.io/proj/; data www.kaggle.com/x https://example.org/y",
         ("https://team.github.io/proj",)),
        ("mail me at user@github.com or visit github.com alone", ()),
        ("", ()),
    ],
)
def test_extract_code_links(text, expected):
    assert extract_code_links(text) == expected


def test_import_is_light():
    code = (
        "import sys, recommender.corpus.handles; "
        "print(any(m in sys.modules for m in ('numpy', 'sklearn', 'torch')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(SEEDS.parent))
    assert out.stdout.strip() == "False"


def quadratic_unique_handles(handles: list[str]) -> list[str]:
    """The straightforward version unique_handles replaced (quadratic in a group of equal bases)."""
    reserved = {h.lower() for h in handles}
    used: set[str] = set()
    result = []
    for handle in handles:
        candidate, n = handle, 2
        while candidate.lower() in used:
            candidate = f"{handle}-{n}"
            n += 1
            if candidate.lower() in reserved:
                candidate = handle  # taken by a later entry: keep counting
        used.add(candidate.lower())
        result.append(candidate)
    return result


def tie_heavy_lists():
    import random

    generator = random.Random(11)
    yield [derive_handle("", a) for a in seed_abstracts()]
    yield [derive_handle("", a) for a in seed_abstracts()] * 7
    yield ["X"] * 300 + ["X-2", "x-5", "X-300", "x-301"] + ["x"] * 50
    yield ["ΑΣ", "Ας", "ας", "ΑΣ-2", "Straße", "STRASSE", "straße", "İ", "i̇"] * 20
    alphabet = ["A", "a", "A-2", "a-3", "b", "B", "B-2", "ß", "A-2-2", "a-10"]
    for _ in range(200):
        yield [generator.choice(alphabet) for _ in range(generator.randint(0, 60))]


@pytest.mark.parametrize("number", range(3))
def test_unique_handles_match_the_straightforward_version(number):
    lists = list(tie_heavy_lists())
    for handles in lists[number::3]:
        assert unique_handles(handles) == quadratic_unique_handles(handles)


def test_unique_handles_is_linear_in_a_group_of_equal_bases():
    # 20k equal handles: the quadratic version takes 2e8 steps (minutes); this one a blink.
    handles = ["Model"] * 20_000 + ["model-7"]
    result = unique_handles(handles)
    assert result[:3] == ["Model", "Model-2", "Model-3"] and result[5:7] == ["Model-6", "Model-8"]
    assert result[-2:] == ["Model-20001", "model-7"]
