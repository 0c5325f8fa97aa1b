"""Short human handles for papers ("FlashDP", "Outer retina model") and code links.

A handle is shown where a title would be and is what users type in
``papers like FlashDP``.  With a title, the handle comes from the title; from
an abstract alone it is the name of the method, model, benchmark or dataset the
abstract introduces, else a short descriptive phrase.

Only the standard library (``re``) is used, so importing this module is cheap.
Every function is deterministic: same input, same output.
"""

from __future__ import annotations

import re

__all__ = ["derive_handle", "unique_handles", "extract_code_links", "MAX_HANDLE_LEN"]

MAX_HANDLE_LEN = 40
UNTITLED = "Untitled"


class _Pattern:
    """A regular expression compiled when first used, so that importing the module (as every
    cold lookup does, naming no paper) compiles none of them."""

    __slots__ = ("pattern", "flags", "_compiled")

    def __init__(self, pattern: str, flags: int = 0):
        self.pattern, self.flags = pattern, flags
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str):
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self.flags)
        return getattr(self._compiled, name)


# --------------------------------------------------------------------------
# Code links
# --------------------------------------------------------------------------

# Characters a URL may contain here: LaTeX braces/backslashes, markdown
# brackets, parentheses, quotes and math delimiters all end a URL.
_URL_CHAR = r"[^\s<>\"'`{}\[\]()|\\^*$“”‘’]"
_CODE_HOST = (
    r"(?:github\.com|gitlab\.com|huggingface\.co|hf\.co|bitbucket\.org|codeberg\.org"
    r"|[\w-]+\.github\.io|[\w-]+\.gitlab\.io|sites\.google\.com|anonymous\.4open\.science)"
)
_CODE_HOST_RE = _Pattern(rf"(?:www\.)?{_CODE_HOST}", re.I)
# Every link _URL_RE can match contains one of these (lower case).
_LINK_MARKERS = (
    "http",
    "github",
    "gitlab",
    "huggingface",
    "hf.co",
    "bitbucket",
    "codeberg",
    "sites.google",
    "4open",
)
# Hosts that only count with a path: "github.com" alone is not a code link.
_NEEDS_PATH = set(
    """
    github.com gitlab.com huggingface.co hf.co bitbucket.org codeberg.org sites.google.com
    anonymous.4open.science
    """.split()
)
_URL_RE = _Pattern(
    rf"\bhttps?://{_URL_CHAR}+" rf"|(?<![\w./@-])(?:www\.)?{_CODE_HOST}(?:/{_URL_CHAR}*)?",
    re.I,
)
_TRAILING_PUNCT = ".,;:!?)]}'\"/"

# LaTeX escapes that would otherwise leak into URLs and names.
_LATEX_ESCAPES = [
    ("\\textasciitilde{}", "~"),
    ("\\textasciitilde", "~"),
    ("\\~{}", "~"),
    ("\\textunderscore{}", "_"),
    ("\\_", "_"),
    ("\\%", "%"),
    ("\\&", "&"),
    ("\\#", "#"),
]
_LATEX_LINK_RE = _Pattern(r"\\(?:url|href)\{([^{}]*)\}")


def _unescape_latex(text: str) -> str:
    for old, new in _LATEX_ESCAPES:
        text = text.replace(old, new)
    return _LATEX_LINK_RE.sub(r" \1 ", text)


def _normalise_url(raw: str) -> str | None:
    """Strip trailing punctuation, add a scheme; None if not a code/project link."""
    url = raw.rstrip(_TRAILING_PUNCT)
    if not re.match(r"https?://", url, re.I):
        url = "https://" + url
    scheme, rest = url.split("://", 1)
    host, _, path = rest.partition("/")
    host = host.lower()
    if not _CODE_HOST_RE.fullmatch(host):
        return None
    bare_host = host[4:] if host.startswith("www.") else host
    if bare_host in _NEEDS_PATH and not path.strip("/"):
        return None
    return f"{scheme.lower()}://{host}" + (f"/{path}" if path else "")


def extract_code_links(text: str) -> tuple[str, ...]:
    """GitHub/GitLab/Hugging Face/project-page URLs in ``text``, in order, deduplicated.

    Links without a scheme ("github.com/a/b") get ``https://``; trailing
    punctuation and slashes are stripped; ``\\url{...}``, ``\\_`` and ``\\%``
    are resolved before matching.
    """
    links: list[str] = []
    lowered = (text or "").lower()
    # Fast path for the common abstract with no link at all (the full scan is slow).
    if not any(marker in lowered for marker in _LINK_MARKERS):
        return ()
    for match in _URL_RE.finditer(_unescape_latex(text or "")):
        url = _normalise_url(match.group())
        if url and url not in links:
            links.append(url)
    return tuple(links)


# --------------------------------------------------------------------------
# Text cleaning
# --------------------------------------------------------------------------

_FORMAT_CMD_RE = _Pattern(
    r"\\(?:textbf|textit|textsc|texttt|textrm|textsf|text|emph|underline|mathrm|mathbf"
    r"|mathit|mathsf|mathtt|mathcal|mathbb|boldsymbol)\s*\{([^{}]*)\}"
)
_MATH_RE = _Pattern(r"\$([^$]*)\$")
_PLAIN_MATH_RE = _Pattern(r"[\w\s.%+-]*")
_ANY_URL_RE = _Pattern(rf"\b(?:https?://|www\.)\S+|{_URL_RE.pattern}", re.I)
_CITATION_RE = _Pattern(r"\[[^\[\]]{1,60}\]")
_ITALIC_RE = _Pattern(
    r"\\(?:emph|textit)\{([^{}]+)\}|(?<![*\w])\*(?!\*)([^*\n]+?)(?<!\s)\*(?![*\w])"
)


def _unwrap_math(match: re.Match) -> str:
    inner = match.group(1).strip()
    return f" {inner} " if _PLAIN_MATH_RE.fullmatch(inner) else " "


def plain_text(text: str) -> str:
    """Plain prose: no URLs, LaTeX markup, math, markdown emphasis or citations."""
    text = _ANY_URL_RE.sub(" ", _unescape_latex(text or ""))
    previous = None
    while previous != text:  # formatting commands can nest
        previous, text = text, _FORMAT_CMD_RE.sub(r"\1", text)
    text = _MATH_RE.sub(_unwrap_math, text)
    text = re.sub(r"``|''|\*+|__|\\[A-Za-z]+", "", text)
    text = _CITATION_RE.sub(" ", text)
    return re.sub(r"\s+", " ", text).strip()


def _tidy(handle: str) -> str:
    """Collapse spaces, drop trailing punctuation, capitalise the first letter."""
    handle = re.sub(r"\s+", " ", handle).strip().rstrip(".,;:!?-–—'\"")
    return handle[:1].upper() + handle[1:] if handle[:1].islower() else handle


# --------------------------------------------------------------------------
# Names the abstract introduces
# --------------------------------------------------------------------------

# Acronyms and names that papers use but rarely introduce.
_STOP_NAMES = set(
    """
    ai agi ml nlp cv llm llms mllm mllms vlm vlms lm lms slm slms lrm lrms rl rlhf rlvr dp sgd
    dp-sgd adam adamw gpu gpus tpu tpus cpu cpus cnn cnns rnn rnns gnn gnns dnn dnns mlp mlps
    lstm lstms gru vit vits dit dits gan gans vae vaes moe lora qlora peft sft dpo ppo grpo cot
    icl rag sota mdp mdps pomdp pomdps ood iid kl mse mae auc roc fid psnr ssim snr ode odes sde
    sdes pde pdes api apis gui guis url pdf iot bert gpt gpt-3 gpt-4 gpt-4o chatgpt clip llama
    qwen imagenet cifar-10 cifar-100 mnist coco ms-coco a100 h100 v100 and not xor nand iii ieee
    acl neurips icml iclr cvpr usa covid-19
    """.split()
)
_MEASURE_RE = _Pattern(r"\d+(?:\.\d+)?[A-Za-z]{1,2}")  # 3D, 13B, 2K, 1.79x
_SIZE_SUFFIX_RE = _Pattern(r"-\d+(?:\.\d+)?[BMK]$")  # GUI-G1-3B -> GUI-G1
_TOKEN_RE = _Pattern(r"[^\W_](?:[^\W_]|-(?=[^\W_])|\.(?=\d))*")


def _namey_part(part: str) -> bool:
    has_digit = any(c.isdigit() for c in part)
    has_alpha = any(c.isalpha() for c in part)
    return (
        (has_digit and has_alpha)
        or any(c.isupper() for c in part[1:])
        or (len(part) == 1 and part.isupper())
    )


def _is_name(token: str) -> bool:
    """CamelCase, letters mixed with digits, acronyms of 3+ letters, "Dyn-O"-style."""
    if not any(c.isalpha() for c in token) or _MEASURE_RE.fullmatch(token):
        return False
    if token.lower() in _STOP_NAMES or len(token) > MAX_HANDLE_LEN:
        return False
    parts = token.split("-")
    if len(parts) > 1:
        last = parts[-1]
        if last.isalpha() and last.islower() and len(last) >= 3:
            return False  # "DiT-based", "LLM-driven": modifiers, not names
        return any(_namey_part(p) for p in parts)
    if token.isupper() and sum(c.isalpha() for c in token) < 3:
        return False  # "TS", "GP"
    return _namey_part(token)


# Cue preceding the first mention of a name.  Verb cues allow a gap of
# articles, a long form followed by "(" ("we present Tiled Flash Linear
# Attention (TFLA)") or a short description and a comma ("a new framework,").
_INTRO_VERB = (
    r"(?:introduc(?:e|es|ed|ing)|propos(?:e|es|ed|ing)|present(?:s|ed|ing)?"
    r"|develop(?:s|ed|ing)?|design(?:s|ed|ing)?|build(?:s|ing)?|built"
    r"|construct(?:s|ed|ing)?|releas(?:e|es|ed|ing)|curat(?:e|es|ed|ing)"
    r"|creat(?:e|es|ed|ing)|contribut(?:e|es|ed|ing))"
)
_NAMING_VERB = (
    r"(?:call|calls|called|name|names|named|dub|dubs|dubbed|term|terms|termed|coin|coins|coined)"
)
_STRONG_CUE_RE = _Pattern(
    rf"\b{_INTRO_VERB}\s+(?:"
    r"(?:(?:the|a|an|our|new|novel|first)\s+)*"
    r"|(?:the\s+|a\s+|an\s+)?[^.;:()]{1,100}\(\s*"
    r"|(?:a|an|the)\s+(?:[\w-]+\s+){0,4}[\w-]+\s*,\s*"
    r")$"
    rf"|\b{_NAMING_VERB}\s+(?:(?:it|them|this|as|the)\s+)*[\"“]?$",
    re.I,
)
_OUR_CUE_RE = _Pattern(r"\bour\s+$", re.I)
_APPOSITIVE_RE = _Pattern(r"\s*(?:\([^()]*\)\s*)?,\s+(?:a|an|the)\b", re.I)
# "a class of algorithms that we call Affine Risk Minimizers"
_MULTIWORD_NAME_RE = _Pattern(
    rf"\b(?i:{_NAMING_VERB})\s+(?:(?i:it|them|as)\s+)?((?:[A-Z][\w-]*\s+){{1,4}}[A-Z][\w-]*)"
)
_SENTENCE_END_RE = _Pattern(r"[.!?]\s+")


def _sentence_prefix(text: str, pos: int) -> str:
    """Text from the start of the sentence containing ``pos`` up to ``pos``."""
    start = max(0, pos - 300)
    ends = list(_SENTENCE_END_RE.finditer(text, start, pos))
    return text[ends[-1].end() if ends else start : pos]


def _cue_strength(text: str, start: int, end: int) -> int:
    """2: introduced/named here; 1: "our X" or "X, a ..."; 0: just used."""
    prefix = _sentence_prefix(text, start)
    if _STRONG_CUE_RE.search(prefix):
        return 2
    if _OUR_CUE_RE.search(prefix) or _APPOSITIVE_RE.match(text, end):
        return 1
    return 0


def _repo_names(links: tuple[str, ...]) -> list[str]:
    """Last path segment of code links when it looks like a name ("PhysioWave")."""
    names = []
    for link in links:
        host_and_path = link.split("://", 1)[1]
        if "/" not in host_and_path:
            continue  # a bare project host has no repository name
        segment = host_and_path.rsplit("/", 1)[-1]
        if (
            len(segment) <= 24
            and "_" not in segment
            and segment.count("-") <= 1
            and _is_name(segment)
            and segment not in names
        ):
            names.append(segment)
    return names


def _introduced_name(text: str, repo_names: list[str]) -> str | None:
    """The best-cued name whose first mention carries an introduction cue."""
    mentions: dict[str, list[re.Match]] = {}
    for match in _TOKEN_RE.finditer(text):
        if _is_name(match.group()):
            mentions.setdefault(match.group(), []).append(match)
    repo_lower = {name.lower() for name in repo_names}
    ranked = []
    for name, found in mentions.items():
        first = found[0]
        strength = _cue_strength(text, first.start(), first.end())
        if strength:
            ranked.append((strength, name.lower() in repo_lower, len(found), -first.start(), name))
    for match in _MULTIWORD_NAME_RE.finditer(text):
        phrase = match.group(1)
        first_at = text.find(phrase)
        if first_at == match.start(1) and len(phrase) <= MAX_HANDLE_LEN:
            ranked.append((2, False, text.count(phrase), -first_at, phrase))
    if not ranked:
        return None
    name = max(ranked)[-1]
    stripped = _SIZE_SUFFIX_RE.sub("", name)
    return stripped if stripped != name and _is_name(stripped) else name


# --------------------------------------------------------------------------
# Descriptive phrases
# --------------------------------------------------------------------------

_ARTICLES = {"a", "an", "the"}
_BREAKERS = set(
    """
    in on at for to from with without by via into onto over under across through between among
    against within beyond towards toward using based and or but nor as than that which who whom
    whose where when while whereas if because since although though how why what whether this
    these those it its their our we they such not no there both each often typically usually
    increasingly recently gradually significantly generally commonly widely largely primarily
    mainly still also already now currently traditionally remarkably
    """.split()
)
_VERBS = set(
    """
    is are was were be been being has have had can could may might will would shall should must
    do does did remain remains start starts provide provides focus focuses aim aims enable
    enables allow allows employ employs use uses require requires play plays offer offers
    struggle struggles suffer suffers face faces rely relies involve involves seek seeks serve
    serves underpin underpins emerge emerges emerged demonstrate demonstrates demonstrated show
    shows achieve achieves become becomes lie lies refer refers consist consists depend depends
    evolve evolves continue continues capture captures pose poses process processes
    """.split()
)
_LEADING_CLAUSE = set(
    """
    while although though as with when since despite because given recently motivated following
    unlike inspired building in over for to due owing after during through
    """.split()
)
_GENERIC_WORDS = set(
    """
    new novel proposed simple general unified final full own main overall entire theoretical
    resulting trained whole first second two three systematic principled improved model method
    approach framework algorithm algorithms methods models technique scheme pipeline system
    architecture
    """.split()
)
_GENERIC_HEADS = set(
    """
    approach method framework algorithm technique scheme pipeline system
    """.split()
)
_WORD_RE = _Pattern(r"[^\W_][\w'’-]*|[^\w\s]")
_OUR_PHRASE_RE = _Pattern(
    r"((?:[\w-]+\s+){1,4}?)(approach|method|framework|model|architecture|algorithm"
    r"|system|technique|scheme|pipeline|benchmark|dataset)\b",
    re.I,
)
_PROPOSAL_RE = _Pattern(
    r"\b(?:we|this (?:paper|work|study))\s+(?:\w+ly\s+)?"
    r"(?:propose[sd]?|introduce[sd]?|present(?:s|ed)?|develop(?:s|ed)?|design(?:s|ed)?"
    r"|build|built|construct(?:s|ed)?|contribute[sd]?)\s+(?:a|an|the)\s+",
    re.I,
)


def _noun_phrase(words: list[str]) -> list[str]:
    """Leading noun phrase: stops at punctuation, verbs, prepositions (one "of" allowed)."""
    phrase: list[str] = []
    for word in words:
        lower = word.lower()
        if not word[0].isalnum():
            break
        if lower in _ARTICLES:
            if phrase:
                phrase.append(word)
            continue
        if lower == "of" and phrase and "of" not in phrase:
            phrase.append(lower)
            continue
        if lower in _BREAKERS or lower in _VERBS or lower == "of":
            break
        phrase.append(word)
    while phrase and phrase[-1].lower() in _ARTICLES | {"of"}:
        phrase.pop()
    return phrase


def _shorten(words: list[str]) -> str:
    """At most 5 words and MAX_HANDLE_LEN characters, keeping the head noun."""
    if "of" in words and (len(words) > 5 or len(" ".join(words)) > MAX_HANDLE_LEN):
        words = words[: words.index("of")]  # "geometric median of a dataset" -> head
        while words and words[-1].lower() in _ARTICLES:
            words.pop()
    while len(words) > 1 and (len(words) > 5 or len(" ".join(words)) > MAX_HANDLE_LEN):
        words = words[1:]  # English noun phrases end in their head: drop modifiers
    return _tidy(" ".join(words)[:MAX_HANDLE_LEN])


def _meaningful(words: list[str]) -> bool:
    return any(w.lower() not in _GENERIC_WORDS for w in words)


def _italic_term(raw: str) -> str | None:
    """First italicised term (authors italicise what they define), 1-5 words."""
    for match in _ITALIC_RE.finditer(_unescape_latex(raw)):
        term = plain_text(match.group(1) or match.group(2))
        words = term.split()
        if (
            1 <= len(words) <= 5
            and len(term) <= MAX_HANDLE_LEN
            and len(term) >= 4
            and any(c.islower() for c in term)
            and _meaningful(words)
        ):
            return _tidy(term)
    return None


def _our_phrase(text: str) -> str | None:
    """ "our outer retina model" -> "Outer retina model"."""
    for our in re.finditer(r"\bour\s+", text, re.I):
        match = _OUR_PHRASE_RE.match(text, our.end())
        if not match:
            continue
        modifiers = match.group(1).split()
        if any(
            w.lower() in _BREAKERS | _VERBS | _ARTICLES or not w[0].isalnum() for w in modifiers
        ):
            continue
        if not _meaningful(modifiers):
            continue
        head = match.group(2)
        words = modifiers if head.lower() in _GENERIC_HEADS else modifiers + [head]
        return _shorten(words)
    return None


def _proposal_phrase(text: str) -> str | None:
    """ "we propose a distance-based diversity regularization that ..." -> its noun phrase."""
    for match in _PROPOSAL_RE.finditer(text):
        words = _noun_phrase(_WORD_RE.findall(text[match.end() : match.end() + 200]))
        while words and words[0].lower() in _GENERIC_WORDS - _GENERIC_HEADS - {"model", "models"}:
            words = words[1:]
        if words and words[0].lower() in _GENERIC_WORDS:
            continue  # "a general framework modeling ...": no descriptive modifier
        if len(words) >= 2 and _meaningful(words):
            return _shorten(words)
    return None


def _sentence_phrase(sentence: str) -> list[str]:
    """Subject of a sentence or, after "We study", its object."""
    words = _WORD_RE.findall(sentence)
    if words and words[0].lower() in _LEADING_CLAUSE and "," in words:
        words = words[words.index(",") + 1 :]
    lowered = [w.lower() for w in words]
    if lowered[:2] in (["this", "paper"], ["this", "work"], ["this", "study"]):
        words, lowered = words[1:], lowered[1:]
    if lowered[:1] in (["we"], ["paper"], ["work"], ["study"]):
        words = words[2:]  # skip subject and verb: "We study the value of ..."
        while words and words[0].lower() in {"how", "whether", "why", "what", "that"}:
            words = words[1:]
    # A parenthesis ends the phrase: "Sparse autoencoders (SAEs) decompose ..."
    return _noun_phrase(words) or [w for w in words if w[0].isalnum()][:4]


def _first_sentence_phrase(text: str) -> str | None:
    """Phrase from the first sentence (or the first one that is not generic)."""
    phrases = [_sentence_phrase(s) for s in _SENTENCE_END_RE.split(text)[:3]]
    phrases = [p for p in phrases if p]
    for phrase in phrases:
        if _meaningful(phrase):
            return _shorten(phrase)
    return _shorten(phrases[0]) if phrases else None


# --------------------------------------------------------------------------
# Handles
# --------------------------------------------------------------------------

# Title prefixes that name a paper genre rather than the paper.
_GENERIC_TITLE_HEADS = {
    "position",
    "survey",
    "review",
    "tutorial",
    "perspective",
    "commentary",
    "technical report",
    "short paper",
    "extended abstract",
}
_TITLE_CUT_WORDS = set(
    """
    for via with using through towards toward in on from by without under at beyond against and
    of to as
    """.split()
)
_TITLE_SPLIT_RE = _Pattern(r"\s*(?::|\s[-–—]{1,2}\s)\s*")


def _short_title(title: str) -> str:
    """A title of at most MAX_HANDLE_LEN characters, cut before a preposition if possible."""
    title = _tidy(title)
    if len(title) <= MAX_HANDLE_LEN:
        return title
    words = title.split()
    best = None
    for i in range(2, len(words)):
        prefix = " ".join(words[:i])
        if len(prefix) > MAX_HANDLE_LEN:
            break
        if (
            words[i].lower() in _TITLE_CUT_WORDS
            and words[i - 1].lower() not in _TITLE_CUT_WORDS | _ARTICLES
        ):
            best = prefix
    if best is None:
        kept: list[str] = []
        for word in words:
            if len(" ".join(kept + [word])) > MAX_HANDLE_LEN:
                break
            kept.append(word)
        while len(kept) > 1 and kept[-1].lower() in _TITLE_CUT_WORDS | _ARTICLES:
            kept.pop()
        best = " ".join(kept) or title[:MAX_HANDLE_LEN]
    return _tidy(best)


def _handle_from_title(title: str) -> str:
    parts = [p for p in _TITLE_SPLIT_RE.split(title, 1) if p.strip()]
    if len(parts) == 2:
        head, rest = parts
        if head.lower() in _GENERIC_TITLE_HEADS:
            return _short_title(rest)
        if len(_tidy(head)) <= MAX_HANDLE_LEN:
            return _tidy(head)  # "FlashDP: Memory-Efficient ..." -> "FlashDP"
        return _short_title(head)
    return _short_title(title)


def _handle_from_abstract(abstract: str) -> str | None:
    text = plain_text(abstract)
    repo_names = _repo_names(extract_code_links(abstract))
    return (
        _introduced_name(text, repo_names)
        or (repo_names[0] if repo_names else None)
        or _italic_term(abstract)
        or _our_phrase(text)
        or _proposal_phrase(text)
        or _first_sentence_phrase(text)
    )


def derive_handle(title: str, abstract: str) -> str:
    """Short handle for a paper: from the title when there is one, else the abstract.

    From a title: the part before a colon when short ("FlashDP: ..." ->
    "FlashDP"), else the title cut to at most 40 characters.  From an
    abstract: the name it introduces ("we propose AlignedGen, ..."), else the
    repository name of its code link, else a 1-5 word phrase (a defined
    italic term, "our X model", "we propose a X", or the first sentence's
    subject).  Never longer than MAX_HANDLE_LEN, never trailing punctuation.
    """
    title = plain_text(title or "")
    if title:
        handle = _handle_from_title(title).strip()
        if handle:
            return handle
    return (_handle_from_abstract(abstract or "") or UNTITLED)[:MAX_HANDLE_LEN].rstrip()


def unique_handles(handles: list[str]) -> list[str]:
    """Same handles, same order; later case-insensitive duplicates become "X-2", "X-3", ...

    A generated handle never takes a name that appears elsewhere in the list.
    Linear time: each base remembers the last number it gave out, and since the
    taken names only grow, no smaller number can have become free since.
    """
    reserved = {h.lower() for h in handles}
    used: set[str] = set()
    last_number: dict[str, int] = {}
    result = []
    for handle in handles:
        candidate = handle
        if handle.lower() in used:
            base = handle.lower()
            n = last_number.get(base, 1) + 1
            while (f"{handle}-{n}").lower() in used or (f"{handle}-{n}").lower() in reserved:
                n += 1
            last_number[base] = n
            candidate = f"{handle}-{n}"
        used.add(candidate.lower())
        result.append(candidate)
    return result
