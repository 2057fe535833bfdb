"""``parse_plan`` gives every completion of the golden corpus its recorded outcome (plan, error, candidates,
detail): the parser's behaviour, pinned on ~14,000 diverse completions (``tests/rewards/parse_corpus.py``)."""

from __future__ import annotations

from rewards.parsing import parse_plan
from tests.rewards.parse_corpus import completions, digest, outcome, read_golden

MIN_CORPUS = 10_000


def test_parse_plan_reproduces_every_golden_outcome():
    plans, recorded = read_golden()
    corpus = list(completions(plans))
    assert len(corpus) == len(recorded) >= MIN_CORPUS
    drifted = [i for i, completion in enumerate(corpus) if digest(completion, 8) != recorded[i][0]]
    assert not drifted, f"the corpus generator changed (completion {drifted[0]}: {corpus[drifted[0]]!r:.300})"
    differing = [
        (i, completion, got, want)
        for i, (completion, want) in enumerate(zip(corpus, recorded, strict=True))
        if (got := outcome(completion, parse_plan(completion))) != want
    ]
    report = "\n".join(
        f"#{i} {completion!r:.300}\n  got  {got[1:]}\n  want {want[1:]}"
        for i, completion, got, want in differing[:10]
    )
    assert not differing, f"{len(differing)} of {len(corpus)} outcomes differ:\n{report}"
