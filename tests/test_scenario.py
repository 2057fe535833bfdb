"""Tests of the scenario schema (fleet_rl.scenario) and generator (fleet_rl.scenario_generator).

reasoning-gym style, per task tier: a bad config raises, the same seed gives the same item, different seeds
give different items, the structure matches the tier, and every item round-trips and passes the tier's fit
filter. Plus the held-out split and hashability the kernel's solve() cache relies on.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import subprocess
import sys

import msgspec
import pytest

from fleet_rl.catalog import GPUS, MODELS
from fleet_rl.scenario import Cluster, Job, Scenario
from fleet_rl.scenario_generator import (
    HELD_OUT_GPUS,
    HELD_OUT_MODELS,
    TASKS,
    TIERS,
    _fits,
    _footprint_gb,
    make_scenario,
)
from tests.design_example import DESIGN_EXAMPLE

EXAMPLE = DESIGN_EXAMPLE  # DESIGN.md §3, verbatim
SEEDS = range(200)
LARGE_MODELS = {"llama-3.1-70b", "qwen2.5-72b", "mixtral-8x7b"}


def with_job(**changes: object) -> dict:
    """EXAMPLE with its first job's fields changed."""
    data = copy.deepcopy(EXAMPLE)
    data["jobs"][0].update(changes)
    return data


# --------------------------------------------------------------------------------------------------------
# Schema: bad input raises a ValueError that says what is wrong
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({**EXAMPLE, "cluster": {"gpu": "h100", "count": 8}}, "unknown gpu 'h100'; valid gpus: h100-sxm"),
        (with_job(model="llama-3-8b"), "unknown model 'llama-3-8b'; valid models: llama-3.1-8b"),
        ({**EXAMPLE, "jobs": [EXAMPLE["jobs"][0], EXAMPLE["jobs"][0]]}, "duplicated: chat"),
        (with_job(priority=-1), "priority must be a number in (0, 100]"),
        (with_job(priority=0), "priority must be a number in (0, 100]"),
        (with_job(priority=101), "priority must be a number in (0, 100]"),
        (with_job(model="gpt2", seq_len=2048), "exceeds the context window of gpt2 (1024 tokens)"),
        (with_job(seq_len=0), "seq_len must be an int in 1..131072"),
        (with_job(batch_size=5000), "batch_size must be an int in 1..4096"),
        (with_job(id="Chat"), "job id 'Chat' is invalid"),
        (with_job(id="1chat"), "job id '1chat' is invalid"),
        (with_job(id="a" * 33), "is invalid"),
        (with_job(kind="infer"), "Invalid enum value 'infer' - at `$.jobs[0].kind`"),
        (with_job(max_quality_loss=0), "max_quality_loss must be a number in (0, 1]"),
        (with_job(max_quality_loss=1.5), "max_quality_loss must be a number in (0, 1]"),
        (with_job(min_tokens_per_s=0), "min_tokens_per_s must be a number in (0, 1e+08]"),
        (with_job(min_tokens_per_s=-5.0), "min_tokens_per_s must be a number in (0, 1e+08]"),
        (with_job(min_tokens_per_s=2e8), "min_tokens_per_s must be a number in (0, 1e+08]"),
        (with_job(min_tokens_per_s="fast"), "Expected `float | null`, got `str`"),
        (with_job(min_tokens_per_s=True), "Expected `float | null`, got `bool`"),
        ({**EXAMPLE, "cluster": {"gpu": "h100-sxm", "count": 0}}, "cluster.count must be in 1..8"),
        ({**EXAMPLE, "cluster": {"gpu": "h100-sxm", "count": 16}}, "cluster.count must be in 1..8"),
        ({**EXAMPLE, "jobs": []}, "a scenario needs 1..8 jobs, got 0"),
        ({**EXAMPLE, "jobs": [with_job(id=f"j{i}")["jobs"][0] for i in range(9)]}, "needs 1..8 jobs, got 9"),
        # Extra keys, at every level.
        ({**EXAMPLE, "notes": "x"}, "unknown field `notes`"),
        ({**EXAMPLE, "cluster": {"gpu": "h100-sxm", "count": 8, "nodes": 2}}, "unknown field `nodes`"),
        (with_job(deadline_s=10), "unknown field `deadline_s` - at `$.jobs[0]`"),
        # Wrong types: no silent coercion.
        (with_job(seq_len="4096"), "Expected `int`, got `str` - at `$.jobs[0].seq_len`"),
        (with_job(batch_size=32.0), "Expected `int`, got `float` - at `$.jobs[0].batch_size`"),
        (with_job(priority="2"), "Expected `float`, got `str` - at `$.jobs[0].priority`"),
        ({**EXAMPLE, "cluster": {"gpu": "h100-sxm", "count": True}}, "Expected `int`, got `bool`"),
        ({**EXAMPLE, "jobs": "chat"}, "Expected `array`, got `str` - at `$.jobs`"),
        ({"jobs": EXAMPLE["jobs"]}, "missing required field `cluster`"),
    ],
)
def test_bad_scenario_raises_value_error_with_message(data: dict, message: str) -> None:
    with pytest.raises(ValueError, match="invalid scenario") as info:
        Scenario.from_dict(data)
    assert message in str(info.value)
    assert not isinstance(info.value, msgspec.ValidationError)  # wrapped, callers catch ValueError only


def test_bad_input_types_and_json() -> None:
    with pytest.raises(ValueError, match="must be a mapping"):
        Scenario.from_dict([EXAMPLE])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not valid JSON"):
        Scenario.from_json('{"cluster": ')
    with pytest.raises(ValueError, match="unknown gpu"):
        Scenario.from_json('{"cluster": {"gpu": "tpu-v5", "count": 1}, "jobs": []}')


def test_direct_construction_is_validated_too() -> None:
    job = Job(id="chat", model="gpt2", kind="serve", priority=1, seq_len=512, batch_size=4)
    with pytest.raises(ValueError, match="unknown gpu"):
        Cluster(gpu="v100", count=1)
    with pytest.raises(ValueError, match="cluster.count must be an int"):
        Cluster(gpu="t4", count=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="context window of gpt2"):
        Job(id="chat", model="gpt2", kind="serve", priority=1, seq_len=1025, batch_size=4)
    with pytest.raises(ValueError, match="unknown kind"):
        Job(id="chat", model="gpt2", kind="eval", priority=1, seq_len=512, batch_size=4)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="priority"):
        Job(id="chat", model="gpt2", kind="serve", priority=float("nan"), seq_len=512, batch_size=4)
    with pytest.raises(ValueError, match="duplicated: chat"):
        Scenario(cluster=Cluster(gpu="t4", count=1), jobs=(job, job))
    # An int priority is stored as a float, so 2 and 2.0 serialise identically.
    assert job.priority == 1.0 and isinstance(job.priority, float)


def test_unknown_task_split_and_seed_raise() -> None:
    with pytest.raises(
        ValueError, match="unknown task 'expert'; valid tasks: easy, medium, hard, multiagent"
    ):
        make_scenario("expert", 0)
    with pytest.raises(ValueError, match="unknown split 'test'; valid splits: train, eval"):
        make_scenario("easy", 0, split="test")
    with pytest.raises(TypeError):
        make_scenario("easy", 1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        make_scenario("easy", True)


# --------------------------------------------------------------------------------------------------------
# Schema: the DESIGN.md §3 shape, round trips, hashability
# --------------------------------------------------------------------------------------------------------


def test_design_example_round_trips_to_the_same_shape() -> None:
    scenario = Scenario.from_dict(EXAMPLE)
    assert scenario.to_dict() == EXAMPLE  # 2 == 2.0: the priorities come back as floats
    assert type(scenario.to_dict()["jobs"]) is list
    assert scenario.to_json() == (
        '{"cluster":{"gpu":"h100-sxm","count":8},"jobs":['
        '{"id":"chat","model":"llama-3.1-8b","kind":"serve","priority":2.0,"seq_len":4096,"batch_size":32},'
        '{"id":"tune","model":"mistral-7b","kind":"lora","priority":1.0,"seq_len":2048,"batch_size":16}]}'
    )
    assert scenario.job_ids == ("chat", "tune")
    assert scenario.gpu is GPUS["h100-sxm"]
    assert scenario.jobs[0].model_spec is MODELS["llama-3.1-8b"]


def test_max_quality_loss_is_omitted_when_unset_and_kept_when_set() -> None:
    scenario = Scenario.from_dict(with_job(max_quality_loss=0.02))
    assert scenario.to_dict()["jobs"][0]["max_quality_loss"] == 0.02
    assert "max_quality_loss" not in scenario.to_dict()["jobs"][1]
    assert scenario.jobs[1].max_quality_loss is None


def test_min_tokens_per_s_is_omitted_when_unset_and_kept_as_a_float_when_set() -> None:
    scenario = Scenario.from_dict(with_job(min_tokens_per_s=1200))
    assert scenario.jobs[0].min_tokens_per_s == 1200.0 and isinstance(
        scenario.jobs[0].min_tokens_per_s, float
    )
    assert scenario.to_dict()["jobs"][0]["min_tokens_per_s"] == 1200.0
    assert "min_tokens_per_s" not in scenario.to_dict()["jobs"][1]
    for task in TASKS:  # every tier draws floors on some jobs, and a job without one carries no key
        jobs = [job for seed in range(6) for job in make_scenario(task, seed).jobs]
        assert any(job.min_tokens_per_s is not None for job in jobs), task
        for job in jobs:
            assert ("min_tokens_per_s" in msgspec.to_builtins(job)) == (job.min_tokens_per_s is not None)


def test_make_scenario_is_memoised_per_tier_and_still_checks_its_arguments(monkeypatch) -> None:
    first = make_scenario("medium", 11)
    assert make_scenario("medium", 11) is first  # a reset of a seen scenario draws nothing again
    with pytest.raises(TypeError, match="bool"):
        make_scenario("easy", True)  # True == 1 would otherwise hit the cached seed 1
    make_scenario("easy", 1)
    with pytest.raises(TypeError, match="bool"):
        make_scenario("easy", True)
    with pytest.raises(ValueError, match="unknown split"):
        make_scenario("easy", 1, "test")
    no_floors = dataclasses.replace(TIERS["medium"], floor_prob=0.0)
    monkeypatch.setitem(TIERS, "medium", no_floors)
    redrawn = make_scenario("medium", 11)  # another tier is another key, never the cached scenario
    assert redrawn.cluster == first.cluster
    assert all(job.min_tokens_per_s is None for job in redrawn.jobs)


def test_a_tier_with_floors_draws_them_from_what_each_job_makes_on_its_even_share(monkeypatch) -> None:
    from fleet_rl.kernel.solver import enumerate_job_options
    from fleet_rl.solved_scenarios import solved_scenario

    fractions = (0.4, 0.8)
    tier = dataclasses.replace(TIERS["medium"], floor_prob=1.0, floor_fractions=fractions)
    monkeypatch.setitem(TIERS, "medium", tier)
    floored = 0
    for seed in range(5):
        scenario = make_scenario("medium", seed)
        unfloored = Scenario(
            cluster=scenario.cluster,
            jobs=tuple(msgspec.structs.replace(job, min_tokens_per_s=None) for job in scenario.jobs),
        )
        share = scenario.cluster.count // len(scenario.jobs)
        table = solved_scenario(unfloored).table
        for j, job in enumerate(scenario.jobs):
            options, _ = enumerate_job_options(table, j)
            basis = max(share, options.rows.gpus[options.ok].min())
            alone = options.tokens_per_s[options.ok & (options.rows.gpus <= basis)].max()
            if job.min_tokens_per_s is None:  # dropped: with it, the optimum missed it (below)
                continue
            floored += 1
            low, high = 0.9 * min(fractions) * alone, max(fractions) * alone  # 2 digits, rounded down
            assert low <= job.min_tokens_per_s <= high, (job.id, job.min_tokens_per_s, alone)
            assert float(f"{job.min_tokens_per_s:.2g}") == job.min_tokens_per_s
        solved = solved_scenario(scenario)
        assert solved.optimal_objective > 0
        # the floors kept can be met together: the optimum runs every job that has one
        assert all(solved.optimal_gpus[j] > 0 for j, job in enumerate(scenario.jobs) if job.min_tokens_per_s)
    assert floored >= 8  # of 12 jobs: most floors are kept


def test_a_floor_the_optimum_cannot_meet_beside_the_others_is_dropped() -> None:
    from fleet_rl.scenario_generator import _floors_met_together
    from fleet_rl.solved_scenarios import solved_scenario

    for seed in range(40):  # medium: some scenarios leave a job too few GPUs for its floor
        scenario = make_scenario("medium", seed)
        assert _floors_met_together(scenario) == scenario  # a generated scenario is its own fixed point
        solved = solved_scenario(scenario)
        for j, job in enumerate(scenario.jobs):
            assert job.min_tokens_per_s is None or solved.optimal_gpus[j] > 0
    base = make_scenario("medium", 0)
    hopeless = Scenario(
        cluster=base.cluster,
        jobs=tuple(msgspec.structs.replace(job, min_tokens_per_s=1e8) for job in base.jobs),
    )
    kept = _floors_met_together(hopeless)
    assert all(job.min_tokens_per_s is None for job in kept.jobs)  # no floor of 1e8 tokens/s can be met
    assert [msgspec.structs.replace(job, min_tokens_per_s=None) for job in base.jobs] == list(kept.jobs)


def test_scenario_is_hashable_and_immutable() -> None:
    first, second = Scenario.from_dict(EXAMPLE), Scenario.from_json(Scenario.from_dict(EXAMPLE).to_json())
    assert first == second and hash(first) == hash(second)
    assert len({first, second, make_scenario("medium", 0)}) == 2
    cache = {first: "solved"}
    assert cache[second] == "solved"
    with pytest.raises(AttributeError):
        first.cluster.count = 4  # type: ignore[misc]
    with pytest.raises(AttributeError):
        first.jobs = ()  # type: ignore[misc]
    # A list given to the constructor becomes a tuple, so the scenario stays hashable.
    built = Scenario(cluster=first.cluster, jobs=list(first.jobs))  # type: ignore[arg-type]
    assert built == first and hash(built) == hash(first)


# --------------------------------------------------------------------------------------------------------
# Generator, one set per task
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("split", ["train", "eval"])
def test_same_seed_same_item(task: str, split: str) -> None:
    for seed in (0, 1, 12345, 2**40):
        assert make_scenario(task, seed, split) == make_scenario(task, seed, split)
        assert make_scenario(task, seed, split).to_json() == make_scenario(task, seed, split).to_json()


def test_items_do_not_depend_on_the_process_hash_seed() -> None:
    code = "from fleet_rl.scenario_generator import make_scenario as m; print(m('hard', 3).to_json())"
    outputs = set()
    for hash_seed in ("0", "1", "random"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, timeout=60
        )
        outputs.add(result.stdout.strip())
    assert outputs == {make_scenario("hard", 3).to_json()}


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("split", ["train", "eval"])
def test_different_seeds_give_different_items(task: str, split: str) -> None:
    items = {make_scenario(task, seed, split) for seed in range(20)}
    assert len(items) >= 15
    assert make_scenario(task, 0, "train") != make_scenario(task, 0, "eval")


def test_tasks_differ_for_the_same_seed() -> None:
    assert len({make_scenario(task, 5) for task in TASKS}) == len(TASKS)


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("split", ["train", "eval"])
def test_structure_matches_the_tier(task: str, split: str) -> None:
    tier = TIERS[task]
    for seed in SEEDS:
        scenario = make_scenario(task, seed, split)
        assert tier.job_count[0] <= len(scenario.jobs) <= tier.job_count[1]
        assert tier.gpu_count[0] <= scenario.cluster.count <= tier.gpu_count[1]
        assert scenario.cluster.gpu in tier.gpus + tier.budget_gpus
        assert len(set(scenario.job_ids)) == len(scenario.jobs)
        if tier.mixed_kinds and len(scenario.jobs) > 1:
            assert len({job.kind for job in scenario.jobs}) > 1, scenario
        large_jobs = [job for job in scenario.jobs if job.model in LARGE_MODELS]
        assert len(large_jobs) >= tier.min_large_jobs
        for job in scenario.jobs:
            assert job.priority in (1.0, 2.0, 3.0)
            assert job.model in tier.small_models + tier.large_models + ("gpt2",)
            if job.model in LARGE_MODELS:
                assert job.kind in tier.large_model_kinds  # never full training of a 46-73B model
            if job.model == "gpt2":
                assert job.seq_len <= 1024
            else:
                assert job.seq_len in tier.seq_lens
            sizes = tier.serve_batch_sizes if job.kind == "serve" else tier.train_batch_sizes
            assert job.batch_size in sizes
            if job.max_quality_loss is not None:
                assert job.kind == "serve" and job.max_quality_loss in tier.quality_tolerances
            # "Answer verified": every job could run alone on the whole cluster (the tier's fit filter).
            assert _fits(tier, MODELS[job.model], job.kind, job.seq_len, job.batch_size, scenario.cluster)


@pytest.mark.parametrize("task", TASKS)
def test_items_round_trip(task: str) -> None:
    for seed in range(50):
        scenario = make_scenario(task, seed)
        assert Scenario.from_dict(scenario.to_dict()) == scenario
        assert Scenario.from_json(scenario.to_json()) == scenario
        assert Scenario.from_json(scenario.to_json().encode()) == scenario


def test_tier_features_appear_across_seeds() -> None:
    """Features a tier promises 'sometimes' show up within 200 seeds (and are absent where they must be)."""
    by_task = {task: [make_scenario(task, seed) for seed in SEEDS] for task in TASKS}
    no_fp8_or_bf16 = {
        name for name, gpu in GPUS.items() if not (gpu.supports("fp8") and gpu.supports("bf16"))
    }
    assert any(sc.cluster.gpu in no_fp8_or_bf16 for sc in by_task["hard"])
    assert any(sc.cluster.gpu == "t4" for sc in by_task["hard"])  # neither BF16 nor FP8
    assert any(job.max_quality_loss for sc in by_task["hard"] for job in sc.jobs)
    assert any(
        job.model in LARGE_MODELS and job.kind == "serve" for sc in by_task["medium"] for job in sc.jobs
    )
    kinds = {job.kind for sc in by_task["easy"] for job in sc.jobs}
    assert kinds == {"train", "lora", "serve"}
    assert {sc.cluster.count for sc in by_task["easy"]} == set(range(1, 9))
    # every tier: quality tolerances and prompts to prefill on some serve jobs, large models on some jobs
    for task in ("easy", "medium", "hard"):
        serve = [job for sc in by_task[task] for job in sc.jobs if job.kind == "serve"]
        assert any(job.max_quality_loss for job in serve) and any(
            job.max_quality_loss is None for job in serve
        )
        assert any(job.prompt_len > job.seq_len // 2 for job in serve) and any(
            not job.prompt_len for job in serve
        )
        assert any(job.model in LARGE_MODELS for sc in by_task[task] for job in sc.jobs)
    assert all(not job.prompt_len for sc in by_task["hard"] for job in sc.jobs if job.kind != "serve")


# --------------------------------------------------------------------------------------------------------
# Held-out split
# --------------------------------------------------------------------------------------------------------


def uses_held_out(scenario: Scenario) -> bool:
    return scenario.cluster.gpu in HELD_OUT_GPUS or any(job.model in HELD_OUT_MODELS for job in scenario.jobs)


@pytest.mark.parametrize("task", TASKS)
def test_train_split_never_uses_held_out_gpus_or_models(task: str) -> None:
    assert not any(uses_held_out(make_scenario(task, seed, "train")) for seed in SEEDS)


@pytest.mark.parametrize("task", TASKS)
def test_eval_split_always_uses_a_held_out_gpu_or_model(task: str) -> None:
    scenarios = [make_scenario(task, seed, "eval") for seed in SEEDS]
    assert all(uses_held_out(sc) for sc in scenarios)
    # Both kinds of held-out item occur: an unseen GPU and an unseen model.
    assert any(sc.cluster.gpu in HELD_OUT_GPUS for sc in scenarios)
    assert any(job.model in HELD_OUT_MODELS for sc in scenarios for job in sc.jobs)


# --------------------------------------------------------------------------------------------------------
# The fit filter's memory estimate, by hand
# --------------------------------------------------------------------------------------------------------


def test_footprint_hand_computed() -> None:
    llama = MODELS["llama-3.1-8b"]
    # bf16 serve, 8-way TP: (2 B x N weights + 128 KiB/token x 4096 x 32 KV) / 8 + 0.5 GB context.
    expected = (2 * llama.num_params + 131_072 * 4096 * 32) / 8 / 1e9 + 0.5
    assert _footprint_gb(llama, "serve", 4096, 32, 8, compact=False) == pytest.approx(expected)
    assert expected == pytest.approx(4.655, abs=1e-3)  # 16.06 GB + 17.18 GB over 8, + 0.5
    # Full training on one GPU: 16 B/param of Adam state alone is 128 GB, more than an 80 GB H100.
    train_gb = _footprint_gb(llama, "train", 1024, 8, 1, compact=True)
    assert train_gb > 16 * 8.0 and train_gb > GPUS["h100-sxm"].memory_gb
    # Qwen2.5-7B has 4 KV heads, so TP stops at 4 even on 8 GPUs.
    qwen = MODELS["qwen2.5-7b"]
    assert _footprint_gb(qwen, "serve", 1024, 1, 8, compact=True) == _footprint_gb(
        qwen, "serve", 1024, 1, 4, compact=True
    )


@pytest.mark.parametrize(
    ("job", "message"),
    [
        ({"kind": "serve", "seq_len": 1024, "prompt_len": 1024}, "leaves no room to generate"),
        ({"kind": "serve", "seq_len": 1024, "prompt_len": -1}, "prompt_len must be an int >= 0"),
        ({"kind": "lora", "seq_len": 1024, "prompt_len": 10}, "prompt_len is for serve jobs"),
    ],
)
def test_prompt_len_is_checked_with_a_precise_reason(job, message):
    data = {
        "cluster": {"gpu": "h100-sxm", "count": 1},
        "jobs": [{"id": "a", "model": "llama-3.1-8b", "priority": 1, "batch_size": 4, **job}],
    }
    with pytest.raises(ValueError, match=message):
        Scenario.from_dict(data)


def test_prompt_len_defaults_to_zero_and_is_omitted_from_json():
    data = {
        "cluster": {"gpu": "h100-sxm", "count": 1},
        "jobs": [
            {
                "id": "a",
                "model": "llama-3.1-8b",
                "kind": "serve",
                "priority": 1,
                "seq_len": 64,
                "batch_size": 4,
            }
        ],
    }
    scenario = Scenario.from_dict(data)
    assert scenario.jobs[0].prompt_len == 0 and "prompt_len" not in scenario.to_json()
    data["jobs"][0]["prompt_len"] = 48
    assert Scenario.from_json(Scenario.from_dict(data).to_json()).jobs[0].prompt_len == 48
