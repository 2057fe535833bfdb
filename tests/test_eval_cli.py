"""eval.py with baselines (no model needed), its usage errors, and where --local_model builds its model."""

from __future__ import annotations

import json

import pytest

import eval as eval_script
import train_grpo


def test_baseline_report_is_json_with_rates_and_per_task_numbers(tmp_path, capsys):
    output = tmp_path / "report.json"
    report = eval_script.main(
        [
            "--baseline",
            "optimal",
            "--num_scenarios",
            "8",
            "--tasks",
            "easy",
            "multiagent",
            "--output",
            str(output),
        ]
    )
    assert report["evaluated"] == "baseline:optimal"
    assert report["mean_percent_of_optimum"] == pytest.approx(100.0)
    assert set(report["per_task"]) <= {"easy", "multiagent"}
    assert json.loads(output.read_text()) == json.loads(capsys.readouterr().out)


def test_even_split_scores_below_the_optimum():
    report = eval_script.main(["--baseline", "even_bf16", "--num_scenarios", "16", "--tasks", "medium"])
    assert 0.0 < report["mean_percent_of_optimum"] < 100.0
    assert report["valid_plan_rate"] == 1.0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "give exactly one of --model or --baseline"),
        (
            ["--baseline", "greedy"],
            "unknown baseline 'greedy'; valid baselines: "
            "even_bf16, heuristic, random, random_split, random_feasible, optimal",
        ),
        (["--baseline", "random", "--tasks", "expert"], "unknown tasks ['expert']"),
        (["--model", "/no/such/dir"], "is not a directory"),
        (["--local_model", "smollm3"], "unknown local_model 'smollm3'; valid: tiny, smollm2"),
        (["--baseline", "random", "--local_model", "tiny"], "it does not go with --baseline"),
    ],
)
def test_usage_errors_exit_2_with_a_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        eval_script.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.fixture
def builders(monkeypatch):
    """Record where ``--local_model`` would build (the builders are imported by eval.py when needed)."""
    built = []
    for target in ("fleet_rl.smollm2.ensure_smollm2", "fleet_rl.tiny_model.ensure_tiny_model"):
        name = target.rsplit(".", 1)[1]
        monkeypatch.setattr(target, lambda path, name=name: built.append((name, str(path))))
    return built


def test_local_model_builds_the_base_itself_at_its_default_dir(builders):
    args = eval_script.EvalArguments(local_model="smollm2")
    eval_script.ensure_local_model(args)
    assert args.model == "outputs/models/smollm2-135m-instruct"
    assert builders == [("ensure_smollm2", "outputs/models/smollm2-135m-instruct")]


def test_local_model_builds_a_missing_adapter_base_only(builders, tmp_path):
    adapter = tmp_path / "run"
    adapter.mkdir()
    missing_base = tmp_path / "base"
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(missing_base)}))
    eval_script.ensure_local_model(eval_script.EvalArguments(model=str(adapter), local_model="tiny"))
    assert builders == [("ensure_tiny_model", str(missing_base))]
    missing_base.mkdir()  # e.g. a warm start the run made from the local model: left as it is
    eval_script.ensure_local_model(eval_script.EvalArguments(model=str(adapter), local_model="tiny"))
    assert len(builders) == 1


def test_local_model_failure_is_one_line(monkeypatch, tmp_path):
    from fleet_rl.smollm2 import SmolLM2Error

    def damaged(path):
        raise SmolLM2Error("damaged GGUF: reinstall")

    monkeypatch.setattr("fleet_rl.smollm2.ensure_smollm2", damaged)
    with pytest.raises(SystemExit) as exit_info:
        eval_script.main(["--local_model", "smollm2", "--model", str(tmp_path)])
    assert exit_info.value.code == "error: damaged GGUF: reinstall"


@pytest.mark.parametrize("load_in_4bit", [True, False])
def test_quantization_is_what_training_builds_from_the_cpu_qlora_preset(load_in_4bit):
    import torch
    from trl import get_quantization_config

    if torch.cuda.is_available():
        pytest.skip("eval computes in bf16 on a GPU; the CPU preset computes in fp32")
    _, _, model_args = train_grpo.parse_args(
        ["--config", "configs/tiny_cpu.yaml", "--load_in_4bit", str(load_in_4bit).lower()]
    )
    training = get_quantization_config(model_args)
    evaluation = eval_script.quantization_config(load_in_4bit)
    if not load_in_4bit:
        assert training is None and evaluation is None
    else:  # NF4 with double quantisation, computing in fp32 on a CPU
        assert evaluation.to_dict() == training.to_dict()
        assert evaluation.bnb_4bit_quant_type == "nf4" and evaluation.bnb_4bit_use_double_quant
