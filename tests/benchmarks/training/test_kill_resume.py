"""benchmarks/training/kill_resume.py: a run killed with SIGKILL, once at a random moment and once inside a
save, resumes each time and ends at max_steps with each step logged once."""

from __future__ import annotations

import pytest

from benchmarks.training import kill_resume


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_kills_one_inside_a_save_and_the_run_still_finishes(tmp_path):
    # an earlier run's checkpoints in the work dir: a rerun starts clean instead of resuming them
    (tmp_path / "interrupted" / "checkpoint-99").mkdir(parents=True)
    (tmp_path / "uninterrupted" / "checkpoint-99").mkdir(parents=True)
    result = kill_resume.main(["--kills", "2", "--max_steps", "4", "--work_dir", str(tmp_path)])
    assert result["per_kill"][0]["resumed_from_step"] == 0
    assert not (tmp_path / "interrupted" / "checkpoint-99").exists()
    assert not (tmp_path / "uninterrupted" / "checkpoint-99").exists()
    assert result["kills"] == 2 and result["final_returncode"] == 0
    assert result["final_step"] == 4 and result["history_each_step_once"]
    assert result["resumes_completed"] == result["resumes"] == 2
    assert result["max_steps_lost_per_kill"] <= 1  # a checkpoint every step
    assert result["per_kill"][1]["mode"] == "inside_save"
    assert result["max_abs_adapter_difference"] is not None


def test_bad_arguments_are_refused(capsys):
    with pytest.raises(SystemExit) as excinfo:
        kill_resume.main(["--kills", "0"])
    assert excinfo.value.code == 2
    assert "--kills must be >= 1" in capsys.readouterr().err
