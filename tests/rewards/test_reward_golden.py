"""Every reward function, and the scoring pass under them, gives every completion of the golden reward corpus
its recorded values: 12,096 completions in 378 TRL-shaped calls over 36 scenarios of every tier
(``tests/rewards/reward_corpus.py``, which says how to record it again after a meant change)."""

from __future__ import annotations

import math

from tests.rewards.reward_corpus import outcomes, read_golden, reward_calls

MIN_CORPUS = 10_000


def _same(got: list, want: list) -> bool:
    return len(got) == len(want) and all(
        a == b or (isinstance(a, float) and isinstance(b, float) and math.isclose(a, b, rel_tol=1e-9))
        for a, b in zip(got, want, strict=True)
    )


def test_rewards_reproduce_every_golden_outcome():
    recorded = read_golden()
    got = [line for completions, columns in reward_calls() for line in outcomes(completions, columns)]
    assert len(got) == len(recorded) >= MIN_CORPUS
    drifted = [i for i, (a, b) in enumerate(zip(got, recorded, strict=True)) if a[0] != b[0]]
    assert not drifted, f"the corpus generator changed (completion {drifted[0]})"
    differing = [(i, a, b) for i, (a, b) in enumerate(zip(got, recorded, strict=True)) if not _same(a, b)]
    report = "\n".join(f"#{i}\n  got  {a[1:]}\n  want {b[1:]}" for i, a, b in differing[:10])
    assert not differing, f"{len(differing)} of {len(got)} outcomes differ:\n{report}"
