"""benchmarks/plan_edit_gains.py: how often each random edit of the template answer raises the reward."""

from __future__ import annotations

import json

from benchmarks.plan_edit_gains import main, template_answer
from fleet_rl import make_scenario
from fleet_rl.training.plan_edits import EDITS
from rewards.parsing import parse_plan


def test_the_template_answer_is_the_first_job_alone_on_every_gpu():
    scenario = make_scenario("medium", 3)
    (job,) = parse_plan(template_answer(scenario)).plan.jobs
    assert (job.id, job.gpus, job.tensor_parallel) == (scenario.jobs[0].id, scenario.cluster.count, 1)


def test_the_every_job_template_names_every_job_the_later_ones_on_one_gpu():
    scenario = make_scenario("medium", 3)
    jobs = parse_plan(template_answer(scenario, "every_job")).plan.jobs
    assert [job.id for job in jobs] == list(scenario.job_ids)
    assert [job.gpus for job in jobs] == [scenario.cluster.count - len(jobs) + 1] + [1] * (len(jobs) - 1)
    assert {job.tensor_parallel for job in jobs} == {1}


def test_prints_each_edits_shares_and_the_same_figures_twice(capsys):
    argv = ["--num_scenarios", "6", "--draws", "3"]
    result = main(argv)
    assert json.loads(capsys.readouterr().out) == result
    assert set(result["edits"]) == {*EDITS, "repair", "repair_placing"}
    assert 0 < sum(result["edits"][name]["drawn"] for name in EDITS) <= 6 * 3
    assert result["edits"]["repair"]["drawn"] <= 6 * 3
    # placing the left-out jobs repairs the first-job template wherever a plain repair does, and more
    # (a one-job scenario's template that runs has nothing to repair either way)
    assert result["edits"]["repair"]["drawn"] <= result["edits"]["repair_placing"]["drawn"] <= 6 * 3
    for edit in result["edits"].values():
        assert 0.0 <= edit["raised"] + edit["lowered"] <= 1.0
    assert main(argv) == result
