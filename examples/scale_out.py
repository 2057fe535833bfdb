"""Scale-out, runnable on one CPU machine: environment servers run the episodes, the trainer generates.

    python examples/scale_out.py                   # 2 local servers + the tiny CPU preset, refine mode
    python examples/scale_out.py --servers 3 -- --max_steps 8

It starts ``--servers`` environment servers (``python -m fleet_rl.server``) on free ports of 127.0.0.1,
then runs ``train_grpo.py`` on the tiny CPU preset in refinement mode with ``--env_base_urls`` pointing
at them: every rollout's episode (its ``check_plan`` calls and its final answer) runs in a session on one
of the servers (the least loaded healthy one; an episode whose server fails moves to another and is
replayed: docs/scale-out.md), and the episode reward comes back from there. Flags after ``--`` go to
``train_grpo.py``.

On real hardware the same two roles run on different machines (docs/scale-out.md): the servers on
machines without a GPU (``python -m fleet_rl.server --host 0.0.0.0 --max-sessions 256``), the policy
served by ``trl vllm-serve`` on one GPU and the trainer on another with ``--use_vllm --vllm_mode server``.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fleet_rl.server.subprocess_server import server_process  # noqa: E402

DEFAULT_TRAIN_FLAGS = (
    "--config", "configs/tiny_cpu.yaml", "--output_dir", "outputs/scale_out",
    "--episode_mode", "refine", "--reward_funcs", "refinement_reward", "--reward_weights", "1.0",
    "--max_steps", "4", "--save_steps", "4", "--eval_scenarios", "0", "--report_to", "none",
)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=2, help="environment servers to start")
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    with contextlib.ExitStack() as stack:
        urls = [
            stack.enter_context(server_process(extra_args=("--max-sessions", "64")))
            for _ in range(args.servers)
        ]
        print(f"environment servers: {' '.join(urls)}", flush=True)
        command = [sys.executable, "train_grpo.py", *DEFAULT_TRAIN_FLAGS, "--env_base_urls", *urls, *extra]
        return subprocess.run(command, cwd=REPO).returncode


if __name__ == "__main__":
    raise SystemExit(main())
