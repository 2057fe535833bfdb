"""Evaluate checkpoints and baseline planners on held-out scenarios; print (and save) a report.

    python eval.py --policies outputs/tiny_cpu,heuristic,even_bf16,random,optimal --load_in_4bit true \
        --tasks easy --prompt_style compact --num_scenarios 32 --output_dir outputs/reports/tiny \
        --run outputs/tiny_cpu
    python eval.py --model outputs/tiny_cpu --tasks easy medium --prompt_style compact --num_scenarios 64
    python eval.py --baseline even_bf16 --num_scenarios 200
    python eval.py --baseline random --tasks hard --output outputs/reports/random_hard.json
    python eval.py --local_model smollm2 --tasks easy medium --prompt_style compact   # SmolLM2 itself
    python eval.py --model outputs/smollm2_cpu --local_model smollm2 --tasks easy medium \
        --prompt_style sized
    python eval.py --policies openai:my-model,heuristic --base_url http://127.0.0.1:8000/v1 \
        --api_key_env OPENAI_API_KEY --num_scenarios 32 --output_dir outputs/reports/endpoint

Scenarios come from the generator's ``eval`` split (held-out GPUs and model); answers are scored with the
training rewards (``rewards.score_completions`` / ``fleet_reward``), so numbers are comparable across
training, evaluation and benchmarks. ``--model`` takes a ``train_grpo.py`` output directory (a LoRA adapter on
its base model) or any full model directory; ``--load_in_4bit`` loads the base in NF4 as QLoRA training did;
``--local_model smollm2`` (or ``tiny``) first converts (builds) that model where it will be loaded, as
``train_grpo.py`` does: at ``--model`` (default ``outputs/models/smollm2-135m-instruct``), or at an adapter's
base path if that is missing. Baselines (``fleet_rl/baselines.py``) need no model; for multi-agent rows they
answer with their part for the agent's job. ``--policies`` evaluates several (baseline names and model
directories, comma-separated, loaded with the same flags) on the same scenarios and writes ``report.json``,
``report.md`` and ``percent_of_optimum.png`` to ``--output_dir`` (``fleet_rl/evaluation_report.py`` documents
the keys). ``openai:<model name>`` in ``--policies`` is a model behind an OpenAI-compatible endpoint at
``--base_url`` (``fleet_rl/endpoint_policy.py``: the same prompts and rewards, bounded concurrency, timeouts,
retries; the key from the environment variable ``--api_key_env`` names; its answers are kept in
``<output_dir>/answers/`` so a rerun with the same endpoint, model, temperature and max_tokens asks only what
is missing; other settings ask everything again).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from fleet_rl.training.config_file import exit_on_a_bad_config

if __name__ == "__main__":  # a bad --config: one line and exit code 2, before trl and torch are imported
    exit_on_a_bad_config(sys.argv[1:], "eval.py")

from trl import TrlParser  # noqa: E402

from fleet_rl.baselines import BASELINES
from fleet_rl.endpoint_policy import ENDPOINT_PREFIX, EndpointSettings, evaluate_endpoint
from fleet_rl.evaluation_report import REPORT_FILES, RUN_FILE, markdown, write_report
from fleet_rl.run_curves import trainer_state
from fleet_rl.scenario_generator import TASKS
from fleet_rl.smollm2 import SmolLM2Error
from fleet_rl.training import heldout
from fleet_rl.training.arguments import LOCAL_MODELS
from fleet_rl.training.heldout import EVAL_DATASET_SEED, evaluate_policy


@dataclass
class EvalArguments:
    """What to evaluate, on which held-out scenarios."""

    policies: str | None = field(
        default=None,
        metadata={
            "help": "Several policies on the same scenarios, comma-separated: baseline names and "
            "checkpoint or model directories (needs --output_dir)."
        },
    )
    output_dir: str | None = field(default=None, metadata={"help": "Where --policies writes its report."})
    run: str | None = field(
        default=None, metadata={"help": "With --policies: a training run whose curves join the report."}
    )
    model: str | None = field(default=None, metadata={"help": "Checkpoint or model directory to evaluate."})
    baseline: str | None = field(default=None, metadata={"help": f"Or a baseline: {', '.join(BASELINES)}."})
    tasks: list[str] = field(default_factory=lambda: list(TASKS), metadata={"help": "Task tiers."})
    num_scenarios: int = field(default=64, metadata={"help": "Held-out scenarios to evaluate."})
    dataset_seed: int = field(default=EVAL_DATASET_SEED, metadata={"help": "Which held-out scenarios."})
    prompt_style: str = field(default="full", metadata={"help": "Prompt style the model was trained with."})
    max_new_tokens: int = field(default=768, metadata={"help": "Generation budget per answer."})
    batch_size: int = field(default=8, metadata={"help": "Prompts generated at once."})
    load_in_4bit: bool = field(default=False, metadata={"help": "Load the base model in NF4 (as QLoRA did)."})
    local_model: str = field(
        default="",
        metadata={
            "help": f"Build a local model first ({', '.join(LOCAL_MODELS)}): at --model (default: its "
            "outputs/models/ directory), or, if --model is an adapter, at the adapter's base path when it "
            "is missing."
        },
    )
    output: str | None = field(default=None, metadata={"help": "Also write the report to this JSON file."})
    base_url: str | None = field(
        default=None,
        metadata={"help": "openai:<model> policies: the endpoint, e.g. http://127.0.0.1:8000/v1."},
    )
    api_key_env: str = field(
        default="OPENAI_API_KEY",
        metadata={"help": "openai:<model> policies: the environment variable holding the API key."},
    )
    temperature: float = field(default=0.0, metadata={"help": "openai:<model> policies: temperature."})
    max_tokens: int | None = field(
        default=None, metadata={"help": "openai:<model> policies: answer budget (default: --max_new_tokens)."}
    )
    concurrency: int = field(default=8, metadata={"help": "openai:<model> policies: requests in flight."})
    request_timeout_s: float = field(default=120.0, metadata={"help": "openai:<model>: seconds per request."})
    max_retries: int = field(
        default=4, metadata={"help": "openai:<model> policies: retries on errors, timeouts, 429 and 5xx."}
    )


def evaluate_baseline(args: EvalArguments) -> dict:
    """Score a baseline planner's answers on the held-out rows."""
    return heldout.evaluate_baseline(
        args.baseline, num_scenarios=args.num_scenarios, tasks=args.tasks, dataset_seed=args.dataset_seed
    )


def quantization_config(load_in_4bit: bool):
    """The base model's ``BitsAndBytesConfig`` (None unless ``load_in_4bit``): what training builds from the
    QLoRA presets' ``ModelConfig`` (NF4, double quantisation, computing in the presets' dtype, bf16 on a GPU
    and fp32 on a CPU) through the same TRL helper, ``get_quantization_config``."""
    import torch
    from trl import ModelConfig, get_quantization_config

    dtype = "bfloat16" if torch.cuda.is_available() else "float32"
    qlora = ModelConfig(
        load_in_4bit=load_in_4bit, bnb_4bit_quant_type="nf4", use_bnb_nested_quant=True, dtype=dtype
    )
    return get_quantization_config(qlora)


def load_model(args: EvalArguments):
    """(model, tokenizer) from a full model directory or a LoRA adapter directory."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    quantization = quantization_config(args.load_in_4bit)
    placement = {"device_map": "auto"} if torch.cuda.is_available() else {}
    adapter = Path(args.model, "adapter_config.json")
    if adapter.exists():
        from peft import AutoPeftModelForCausalLM

        model = AutoPeftModelForCausalLM.from_pretrained(
            args.model, quantization_config=quantization, **placement
        )
        base = json.loads(adapter.read_text())["base_model_name_or_path"]
        tokenizer_path = args.model if Path(args.model, "tokenizer_config.json").exists() else base
    else:
        model = AutoModelForCausalLM.from_pretrained(
            args.model, quantization_config=quantization, **placement
        )
        tokenizer_path = args.model
    return model, AutoTokenizer.from_pretrained(tokenizer_path)


def ensure_local_model(args: EvalArguments) -> None:
    """Build ``args.local_model`` where the evaluation will load it (see ``EvalArguments.local_model``)."""
    from fleet_rl.smollm2 import ensure_smollm2
    from fleet_rl.tiny_model import ensure_tiny_model

    args.model = args.model or LOCAL_MODELS[args.local_model]
    adapter = Path(args.model, "adapter_config.json")
    if adapter.exists():
        target = json.loads(adapter.read_text())["base_model_name_or_path"]
        if Path(target).exists():  # the base is there (SmolLM2, the tiny model or a warm start made from one)
            return
    else:
        target = args.model  # the base itself: ensure_smollm2 also refuses a directory it did not finish
    build = {"tiny": ensure_tiny_model, "smollm2": ensure_smollm2}[args.local_model]
    try:
        build(target)
    except SmolLM2Error as error:
        raise SystemExit(f"error: {error}") from None


def evaluate_model(args: EvalArguments) -> dict:
    """Load ``args.model`` (building ``args.local_model`` first if asked) and answer the held-out rows."""
    if args.local_model:
        ensure_local_model(args)
    model, tokenizer = load_model(args)
    return evaluate_policy(
        model,
        tokenizer,
        num_scenarios=args.num_scenarios,
        tasks=args.tasks,
        prompt_style=args.prompt_style,
        max_new_tokens=args.max_new_tokens,
        batch_size=args.batch_size,
        dataset_seed=args.dataset_seed,
    )


def endpoint_settings(args: EvalArguments, name: str) -> EndpointSettings:
    """The ``EndpointSettings`` of policy ``openai:<model>`` from the flags."""
    return EndpointSettings(
        model=name.removeprefix(ENDPOINT_PREFIX),
        base_url=args.base_url or "",
        api_key_env=args.api_key_env,
        temperature=args.temperature,
        max_tokens=args.max_tokens or args.max_new_tokens,
        concurrency=args.concurrency,
        timeout_s=args.request_timeout_s,
        max_retries=args.max_retries,
    )


def evaluate_endpoint_policy(args: EvalArguments, name: str) -> dict:
    """Policy ``openai:<model>``: its answers to the held-out rows, kept in ``<output_dir>/answers/``."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name.removeprefix(ENDPOINT_PREFIX))
    return evaluate_endpoint(
        endpoint_settings(args, name),
        num_scenarios=args.num_scenarios,
        tasks=args.tasks,
        prompt_style=args.prompt_style,
        dataset_seed=args.dataset_seed,
        answers_file=Path(args.output_dir, "answers", f"{safe}.jsonl"),
    )


def _free_accelerator_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def policy_kinds(names: str) -> list[tuple[str, str]]:
    """(name, "baseline" or "model") per comma-separated policy; ``ValueError`` names an unknown one."""
    policies = [name.strip() for name in names.split(",") if name.strip()]
    if not policies:
        raise ValueError("--policies is empty; give baseline names or model directories, comma-separated")
    kinds = []
    for name in policies:
        if name.startswith(ENDPOINT_PREFIX):
            if name == ENDPOINT_PREFIX:
                raise ValueError(f"{name!r} names no model; write {ENDPOINT_PREFIX}<model name>")
            kinds.append((name, "endpoint"))
        elif name in BASELINES:
            kinds.append((name, "baseline"))
        elif Path(name).is_dir():
            kinds.append((name, "model"))
        else:
            raise ValueError(
                f"unknown policy {name!r}: neither a baseline ({', '.join(BASELINES)}), a model directory "
                f"nor {ENDPOINT_PREFIX}<model name>"
            )
    return kinds


def evaluate_policies(args: EvalArguments, kinds: list[tuple[str, str]]) -> dict:
    """Every policy on the same held-out rows. The report in ``args.output_dir`` is written again after each
    policy, so an interrupted evaluation leaves the policies done so far; a policy that fails (a model that
    does not load, a generation error) is reported with its error and the others go on."""
    policies: list[dict] = []
    report: dict = {}
    for name, kind in kinds:
        try:
            if kind == "baseline":
                summary = evaluate_baseline(replace(args, baseline=name))
            elif kind == "endpoint":
                summary = evaluate_endpoint_policy(args, name)
            else:
                summary = evaluate_model(replace(args, model=name))
            policies.append({"name": name, "kind": kind, "summary": summary})
        except (SystemExit, KeyboardInterrupt):
            raise
        except Exception as error:  # one policy's failure must not lose the others' results
            message = f"{type(error).__name__}: {error}".splitlines()[0][:300]
            print(f"eval.py: policy {name!r} failed: {message}", file=sys.stderr)
            policies.append({"name": name, "kind": kind, "error": message})
        finally:
            if kind == "model":
                _free_accelerator_memory()  # the next model loads into the memory this one held
        report = write_report(
            policies,
            tasks=args.tasks,
            num_scenarios=args.num_scenarios,
            dataset_seed=args.dataset_seed,
            output_dir=args.output_dir,
            run_dir=args.run,
        )
    return report


def main(argv: list[str] | None = None) -> dict:
    exit_on_a_bad_config(sys.argv[1:] if argv is None else argv, "eval.py")
    parser = TrlParser((EvalArguments,))
    (args,) = parser.parse_args_and_config(argv)
    unknown = [task for task in args.tasks if task not in TASKS]
    if unknown:
        parser.error(f"unknown tasks {unknown}; valid tasks: {', '.join(TASKS)}")
    if args.local_model and args.local_model not in LOCAL_MODELS:
        parser.error(f"unknown local_model {args.local_model!r}; valid: {', '.join(LOCAL_MODELS)}")
    if args.policies is not None:
        if args.model is not None or args.baseline is not None:
            parser.error("--policies replaces --model and --baseline: list them all in --policies")
        if not args.output_dir:
            parser.error("--policies writes a report: give --output_dir")
        try:
            kinds = policy_kinds(args.policies)
            for name, kind in kinds:
                if kind == "endpoint":
                    if not args.base_url:
                        raise ValueError(f"policy {name!r} needs --base_url (e.g. http://127.0.0.1:8000/v1)")
                    endpoint_settings(args, name)  # every flag checked before anything runs
            if args.run is not None:
                trainer_state(args.run)  # before any policy is evaluated: a clear error, nothing written
        except (ValueError, FileNotFoundError) as error:
            parser.error(str(error))
        report = evaluate_policies(args, kinds)
        print(markdown(report), end="")
        files = [*REPORT_FILES, *([RUN_FILE] if args.run is not None else [])]
        print(f"wrote {', '.join(str(Path(args.output_dir, name)) for name in files)}")
        return report
    if args.local_model:
        if args.baseline is not None:
            parser.error("--local_model builds a model to evaluate; it does not go with --baseline")
        ensure_local_model(args)
    if args.run is not None or args.output_dir is not None:
        parser.error("--run and --output_dir go with --policies")
    if (args.model is None) == (args.baseline is None):
        parser.error("give exactly one of --model or --baseline")
    if args.baseline is not None and args.baseline not in BASELINES:
        parser.error(f"unknown baseline {args.baseline!r}; valid baselines: {', '.join(BASELINES)}")
    if args.model is not None and not Path(args.model).is_dir():
        parser.error(f"--model {args.model!r} is not a directory")
    if args.baseline is not None:
        report = evaluate_baseline(args)
    else:
        report = evaluate_model(replace(args, local_model=""))  # built above
    report = {"evaluated": args.model or f"baseline:{args.baseline}", **report}
    text = json.dumps(report, indent=2)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text)
    print(text)
    return report


if __name__ == "__main__":
    result = main()
    failed = [policy["name"] for policy in result.get("policies", []) if "error" in policy]
    raise SystemExit(f"eval.py: {len(failed)} policies failed: {', '.join(failed)}" if failed else 0)
