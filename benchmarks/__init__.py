"""Benchmarks that run the project end to end, by subject: scripts outside the installed package, run as
modules from the repository root (``python -m benchmarks.learning ...``; docs/benchmarks.md lists them all).

- ``benchmarks/learning/``: does GRPO improve the policy it starts from (``python -m benchmarks.learning``)
  and the measurements around that benchmark: the SFT curve, where an answer's job list ends, the held-out
  scenarios' fingerprint;
- ``benchmarks/kernel/``: the kernel against published figures, and the kernel's and the reward's speed;
- ``benchmarks/reward/``: what the reward pays for: exploits, the signal in a group, scenario-blind
  templates, what it told a training run;
- ``benchmarks/server/``: the environment server under load and in a soak;
- ``benchmarks/training/``: what a training step costs (its time, its prompt's tokens), kill and resume;
- this package, shared by them: ``REPO``, ``machine`` (CPU model, git state) and ``process_memory`` (RSS,
  CPU time, a child process).
"""

from pathlib import Path

__all__ = ["REPO"]

REPO = Path(__file__).resolve().parent.parent  # the repository: configs/, train_grpo.py, its git state
