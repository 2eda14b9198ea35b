"""What the instrumented RAG application of :mod:`ragbatch.testing.otlp_app` says (pure).

Trace number ``k`` of seed ``s`` is always the same question, documents and answer: a small
invented world of landmarks (an observatory in Varnholt, ...) with one fact asked about each.
Three kinds, so that a judge gives a mix of verdicts:

- ``grounded``: the retriever finds the landmark's documents and the answer repeats the fact
  in the documents' own words;
- ``ungrounded``: the same documents, but the answer names the landmark and then invents a
  story in words no document holds;
- ``irrelevant``: the retriever returns only unrelated documents (weather, markets), sharing
  no word with the question, and the answer says nothing found.

Word overlap (the mock provider's judge for rows without a ``mock`` block) tells them apart:
a grounded answer's words are all in the documents, an ungrounded one's mostly not, and an
irrelevant trace's documents hold none of the question's words. A fraction of traces
(``multi_hop``) retrieve twice: the landmark, then its town.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

KINDS = ("grounded", "ungrounded", "irrelevant")
WEIGHTS = (0.5, 0.25, 0.25)
# What the mock provider's word-overlap judge gives each kind at the default thresholds
# (tests/watch/test_phoenix_app.py runs it on the traces read back from Phoenix).
OVERLAP_DIAGNOSIS = {
    "grounded": "PASS",
    "ungrounded": "GENERATOR_UNGROUNDED",
    "irrelevant": "RETRIEVAL_MISS",
}

NAMES = (
    "Varnholt", "Aldermoor", "Brenwick", "Castelby", "Dunmere", "Elsworth", "Fenridge",
    "Galloway", "Hartwell", "Ivybridge", "Kestrelby", "Lowmoor", "Marrowdale", "Northope",
)  # fmt: skip
LANDMARKS = (
    "observatory", "library", "bridge", "museum", "lighthouse", "aqueduct", "theatre",
    "canal", "cathedral", "windmill",
)  # fmt: skip
TOWNS = ("Quenby", "Rostholm", "Saltcombe", "Thornbury", "Ulverdale", "Wexmoor", "Yarrowick")
ARCHITECTS = ("Edda Lindqvist", "Tomas Harrowgate", "Ines Valcourt", "Piet Oosterhuis")
MATERIALS = ("granite", "sandstone", "limestone", "brick", "oak")
RIVERS = ("Ember", "Lune", "Tamsin", "Wyre")

# (question, the document stating the fact, the grounded answer): every answer word is in
# the document, and the question's words (stop words aside) are too.
FACTS = (
    ("In which year was the {e} founded?",
     "The {e} was founded in the year {year} after a long public campaign.",
     "The {e} was founded in the year {year}."),
    ("Which architect designed the {e}?",
     "The {e} was designed by the architect {architect}, who chose local {material}.",
     "The architect {architect} designed the {e}."),
    ("Which town is the {e} located in?",
     "The {e} is located in the town of {town}, on the banks of the {river} river.",
     "The {e} is located in the town of {town}."),
)  # fmt: skip
# The landmark's other facts, for the second document: its name and kind, nothing asked.
ASIDES = (
    "Visitors to the {e} can climb its tower on weekends.",
    "A restoration of the {e} finished recently, funded by donations.",
)
# Unrelated documents: none of the facts' or questions' words.
NOISE = (
    "Rainfall in {town} peaks in autumn, when the {river} floods the lower meadows.",
    "The market of {town} sells cheese, apples and wool every Thursday morning.",
    "Ferries cross the {river} estuary twice daily during calm weather.",
    "Bakers in {town} are known for rye loaves flavoured with caraway seeds.",
)
# Invented stories: content words that no document above holds.
STORIES = (
    "owes everything to wandering Morrish sailors seeking shelter from violent gales",
    "began as a secret smugglers den hidden beneath abandoned salt warehouses",
    "was dreamed up by twin sisters racing carrier pigeons across frozen marshes",
)
NOTHING_FOUND = "Sorry, nothing relevant turned up, so no answer can be given."
TOWN_QUERY = "history of {town}"
TOWN_DOCUMENT = "{town} grew around its {landmark}, whose visitors still fill the squares."


@dataclass(frozen=True, slots=True)
class Document:
    id: str
    content: str
    score: float


@dataclass(frozen=True, slots=True)
class Retrieval:
    query: str
    documents: tuple[Document, ...]


@dataclass(frozen=True, slots=True)
class TraceContent:
    """One trace's text: its kind, the question, one retrieval per hop, the answer."""

    index: int
    kind: str
    question: str
    retrievals: tuple[Retrieval, ...]
    answer: str


def _documents(prefix: str, texts: list[str], rng: random.Random) -> tuple[Document, ...]:
    scores = sorted((round(rng.uniform(0.3, 0.95), 4) for _ in texts), reverse=True)
    return tuple(
        Document(f"{prefix}-{n}", text, score)
        for n, (text, score) in enumerate(zip(texts, scores, strict=True))
    )


def trace_content(seed: int, index: int, multi_hop: float = 0.2) -> TraceContent:
    """Trace number ``index`` of ``seed`` (the same for the same arguments, on any machine)."""
    rng = random.Random(f"ragbatch-rag-app:{seed}:{index}")
    kind = rng.choices(KINDS, WEIGHTS)[0]
    name, landmark = rng.choice(NAMES), rng.choice(LANDMARKS)
    values = {
        "e": f"{name} {landmark}",
        "year": str(rng.randrange(1700, 1990)),
        "architect": rng.choice(ARCHITECTS),
        "material": rng.choice(MATERIALS),
        "town": rng.choice(TOWNS),
        "river": rng.choice(RIVERS),
    }
    question, fact, grounded = (t.format(**values) for t in rng.choice(FACTS))
    other = dict(values, town=rng.choice([t for t in TOWNS if t != values["town"]]))
    noise = [t.format(**other) for t in rng.sample(NOISE, 2)]
    slug = f"kb/{name.lower()}-{landmark}"
    if kind == "irrelevant":
        texts = [*noise, NOISE[0].format(**values)]
        answer = NOTHING_FOUND
    else:
        texts = [fact, rng.choice(ASIDES).format(**values), noise[0]]
        story = rng.choice(STORIES)
        answer = grounded if kind == "grounded" else f"The {values['e']} {story}."
    retrievals = [Retrieval(question, _documents(slug, texts, rng))]
    if rng.random() < multi_hop:
        hop = [TOWN_DOCUMENT.format(town=values["town"], landmark=landmark), noise[1]]
        town_slug = f"kb/town-{values['town'].lower()}"
        retrievals.append(Retrieval(TOWN_QUERY.format(**values), _documents(town_slug, hop, rng)))
    return TraceContent(index, kind, question, tuple(retrievals), answer)
