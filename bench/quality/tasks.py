"""Task sets for bench/quality/run.py, deterministic from a seed.

Documents come from text every Debian 12 machine with python3 has: the Python
Language Reference that CPython ships in its standard library as
pydoc_data/topics.py (package libpython3.11-stdlib), read with `ast` from the
running interpreter's stdlib. Prose paragraphs (no code, mostly letters) are
joined within a topic into documents of 80-160 tokens; a seeded sample of
them is the POOL, and every prompt draws its documents from the pool, so a
document recurs across prompts as in RAG. Facts planted for the QA tasks are
seeded synthetic sentences inserted at a sentence boundary of a pool document
(that variant is a document of its own).

A prompt is token-id segments [P, doc_1, ..., doc_n, question], each
tokenized on its own and concatenated (a document's ids are the same
wherever it appears). Their text is exactly the model's chat template over a
system message and a user message holding the documents and the question,
with the generation prompt: checked against the template for every prompt.
"""

import ast
import hashlib
import os
import random
import re
import sysconfig
import textwrap
from dataclasses import dataclass

SYSTEM_PROMPTS = (
    "You are a helpful assistant. Answer from the documents.",
    "You are a careful research assistant. Use only the documents the user provides.",
    "You answer questions about the documents below. Be brief and exact.",
)
SEPARATOR = "\n\n"  # ends every document
DOC_TOKENS = (80, 160)  # a pool document's length, separator included
TASKS = ("qa", "continuation", "two_fact")

SURNAMES = ("Marlow", "Hadley", "Corwin", "Everly", "Thorne", "Prescott", "Whitby", "Ashford",
            "Brandt", "Calloway", "Dunmore", "Fenwick", "Galloway", "Harrow", "Iverson",
            "Kendrick", "Lockwood", "Merrick", "Norwood", "Oakley", "Pembroke", "Quinlan",
            "Radford", "Sherwood", "Tolland", "Underhill", "Vickers", "Westbrook", "Yardley")
PLACES = ("archive", "vault", "library", "depot", "observatory", "workshop", "museum", "laboratory")
FIRST_NAMES = ("Tom", "Ann", "Mark", "Lucy", "Paul", "Emma", "Jack", "Nora", "Sam", "Rose",
               "Carl", "Ella", "Hugo", "Iris", "Leon", "Maya", "Owen", "Ruth", "Ben", "Vera")

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"(])")
ASCII = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'",
                       "\u2014": "-", "\u2026": "..."})


@dataclass(frozen=True)
class Doc:
    name: str  # "topic#k" for a pool document, with "+fact" when planted
    text: str  # separator included
    ids: tuple


@dataclass
class Prompt:
    task: str
    index: int
    system: int  # index into SYSTEM_PROMPTS
    prefix: tuple  # P: the system message and the user turn's header
    docs: list  # Doc
    question: tuple  # question text, end of turn, assistant header
    question_text: str
    continuation: tuple = ()  # the true continuation (teacher forced), `continuation` task
    expect: tuple = ()  # numbers the answer must state (qa, two_fact)
    distractor: str = ""  # the planted distractor's number (qa)

    @property
    def doc_starts(self):
        """Actual start position of each document."""
        starts, at = [], len(self.prefix)
        for d in self.docs:
            starts.append(at)
            at += len(d.ids)
        return starts

    @property
    def question_start(self):
        return len(self.prefix) + sum(len(d.ids) for d in self.docs)

    @property
    def tokens(self):
        """The whole prompt, ids."""
        return list(self.prefix) + [t for d in self.docs for t in d.ids] + list(self.question)


class Tokenizer:
    def __init__(self, model_dir):
        from tokenizers import Tokenizer as HfTokenizer
        import jinja2
        self.tok = HfTokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        with open(os.path.join(model_dir, "chat_template.jinja")) as f:
            self.template = jinja2.Environment().from_string(f.read())
        self.im_end = self.tok.token_to_id("<|im_end|>")

    def encode(self, text):
        return tuple(self.tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids):
        return self.tok.decode(list(ids), skip_special_tokens=False)

    def chat(self, system, user):
        return self.template.render(messages=[{"role": "system", "content": system},
                                              {"role": "user", "content": user}],
                                    add_generation_prompt=True)


def reference_paragraphs():
    """(topic, paragraph) of the Language Reference's prose, in file order.
    Paragraphs are rst rendered as text: code, grammar and lists are
    indented or start with a marker, examples hold '>>>'; whatever is left
    and does not start with a capital, end with a full stop and consist
    mostly of letters is skipped too."""
    path = os.path.join(sysconfig.get_paths()["stdlib"], "pydoc_data", "topics.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    topics = next(ast.literal_eval(node.value) for node in tree.body
                  if isinstance(node, ast.Assign) and node.targets[0].id == "topics")
    for topic in sorted(topics):
        for par in re.split(r"\n\s*\n", topics[topic]):
            par = textwrap.dedent(par).strip("\n")
            if (not par or par[0].isspace() or par.startswith(("*", "-", "+", "(")) or "::" in par
                    or ">>>" in par):
                yield topic, None
                continue
            text = " ".join(par.split()).translate(ASCII)
            text = re.sub(r"\*+([^*\s][^*]*)\*+", r"\1", text)  # *emphasis*
            prose = (text[:1].isupper() and text.endswith(".") and text.isascii()
                     and len(text.split()) >= 12
                     and sum(c.isalpha() or c == " " for c in text) >= 0.9 * len(text))
            yield topic, text if prose else None


def candidate_docs(tok):
    """Consecutive prose paragraphs of one topic joined up to DOC_TOKENS."""
    lo, hi = DOC_TOKENS
    size = lambda text: len(tok.encode(text + SEPARATOR))
    out, seen, run, run_topic = [], set(), "", None

    def flush():
        if run and lo <= size(run) <= hi and run not in seen:
            seen.add(run)
            out.append((run_topic, run))

    for topic, text in list(reference_paragraphs()) + [(None, None)]:
        if text and run and topic == run_topic and size(run + " " + text) <= hi:
            run += " " + text
            continue
        flush()
        run, run_topic = text or "", topic
    return out


def build_pool(tok, size, seed):
    """`size` documents sampled from the candidates, and a fingerprint of
    the pool (it depends on the Python version's Language Reference)."""
    cands = candidate_docs(tok)
    if len(cands) < size:
        raise SystemExit(f"quality: only {len(cands)} prose documents in pydoc_data/topics.py, "
                         f"asked for a pool of {size}")
    picked = random.Random(f"{seed}:pool").sample(range(len(cands)), size)
    pool, count = [], {}
    for i in sorted(picked):
        topic, text = cands[i]
        count[topic] = count.get(topic, 0) + 1
        pool.append(Doc(f"{topic}#{count[topic]}", text + SEPARATOR, tok.encode(text + SEPARATOR)))
    digest = hashlib.sha256("\x00".join(d.text for d in pool).encode()).hexdigest()[:16]
    return pool, digest


def plant(tok, doc, sentence, rng):
    """`doc` with `sentence` inserted at a random sentence boundary."""
    parts = SENTENCE_END.split(doc.text[:-len(SEPARATOR)])
    at = rng.randrange(len(parts) + 1)
    text = " ".join(parts[:at] + [sentence] + parts[at:]) + SEPARATOR
    return Doc(doc.name + "+fact", text, tok.encode(text))


def code(rng, avoid=()):
    while True:
        c = str(rng.randrange(1000, 10000))
        if c not in avoid:
            return c


def split_sentence(tok, doc):
    """(first half, second half) of each sentence of `doc` long enough:
    the first half at least 16 tokens, the second at least 8."""
    out = []
    for s in SENTENCE_END.split(doc.text[:-len(SEPARATOR)]):
        if re.search(r"[a-z][.][A-Z]", s):  # two sentences run together in the source
            continue
        words = s.split()
        m = len(words) // 2
        first, second = " ".join(words[:m]), " ".join(words[m:])
        if len(tok.encode(first)) >= 16 and len(tok.encode(second)) >= 8:
            out.append((first, second))
    return out


def make_prompt(tok, pool, task, index, seed, docs_per_prompt=(4, 5)):
    rng = random.Random(f"{seed}:{task}:{index}")
    system = rng.randrange(len(SYSTEM_PROMPTS))
    docs = [pool[i] for i in rng.sample(range(len(pool)), rng.choice(docs_per_prompt))]
    p = Prompt(task, index, system, (), docs, (), "")
    reply = ""
    if task == "qa":
        who, other = rng.sample(SURNAMES, 2)
        place = rng.choice(PLACES)
        right = code(rng)
        wrong = code(rng, avoid=(right,))
        target, decoy = rng.sample(range(len(docs)), 2)
        docs[target] = plant(tok, docs[target], f"The access code for the {who} {place} is {right}.", rng)
        docs[decoy] = plant(tok, docs[decoy], f"The access code for the {other} {place} is {wrong}.", rng)
        p.question_text = f"What is the access code for the {who} {place}?"
        p.expect, p.distractor = (right,), wrong
    elif task == "two_fact":
        a, b = rng.sample(FIRST_NAMES, 2)
        ca = code(rng)
        cb = code(rng, avoid=(ca,))
        ia, ib = rng.sample(range(len(docs)), 2)
        # "code" alone makes this model write Python (the documents are
        # about Python); PINs it answers at a usable rate in full prefill.
        docs[ia] = plant(tok, docs[ia], f"The PIN of {a} is {ca}.", rng)
        docs[ib] = plant(tok, docs[ib], f"The PIN of {b} is {cb}.", rng)
        p.question_text = f"What are the PINs of {a} and {b}? Give both numbers."
        p.expect = (ca, cb)
    elif task == "continuation":
        # A sentence from one of the prompt's documents, any of them.
        choices = [(d, half) for d in docs for half in split_sentence(tok, d)]
        if not choices:
            return None
        _, (first, second) = rng.choice(choices)
        # The answer starts with the sentence's first half (the reply is
        # primed with it), so the model's task is to copy the rest from
        # the document: what is scored is how well the KV lets it.
        p.question_text = "Quote the sentence from the documents that begins as your answer does."
        reply = first
        p.continuation = tok.encode(" " + second)
    else:
        raise ValueError(f"unknown task {task!r}")
    header = f"<|im_start|>system\n{SYSTEM_PROMPTS[system]}<|im_end|>\n<|im_start|>user\n"
    tail = "<|im_end|>\n<|im_start|>assistant\n"
    p.prefix = tok.encode(header)
    p.question = tok.encode(f"Question: {p.question_text}{tail}{reply}")
    user = "".join(d.text for d in docs) + f"Question: {p.question_text}"
    text = header + "".join(d.text for d in docs) + f"Question: {p.question_text}" + tail
    if tok.chat(SYSTEM_PROMPTS[system], user) != text:
        raise SystemExit("quality: the segments' text is not the chat template's")
    return p


def make_tasks(tok, tasks, prompts, seed, pool_size=100):
    """{task: [Prompt]} and the pool's fingerprint. Prompt i of a task
    depends only on (seed, task, i): a shorter run is a prefix of a
    longer one."""
    pool, digest = build_pool(tok, pool_size, seed)
    out = {}
    for task in tasks:
        out[task], i = [], 0
        while len(out[task]) < prompts:
            p = make_prompt(tok, pool, task, i, seed)
            i += 1
            if p is not None:
                p.index = len(out[task])
                out[task].append(p)
    return out, pool, digest
