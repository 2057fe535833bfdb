"""Resolve reward function names from a config: ``rewards.REWARD_FUNCS`` first, then the episode reward
``refinement_reward`` (``episode_mode: refine``, beside its environment), then dotted import paths."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

from rewards import REWARD_FUNCS

__all__ = ["EPISODE_REWARD", "resolve_reward_funcs"]

EPISODE_REWARD = "refinement_reward"  # fleet_rl.env.trl_environment.refinement_reward


def _import_dotted(path: str) -> Callable:
    module_path, _, name = path.rpartition(".")
    try:
        module = importlib.import_module(module_path)
    except ImportError as error:
        raise ValueError(
            f"reward function {path!r}: cannot import module {module_path!r} ({error})"
        ) from error
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"reward function {path!r}: module {module_path!r} has no callable {name!r}")
    return fn


def resolve_reward_funcs(names: Sequence[str]) -> list[Callable]:
    """The reward functions for ``names``; an unknown name raises ``ValueError`` listing the valid ones."""
    if not names:
        raise ValueError(f"no reward functions given; valid names: {', '.join(REWARD_FUNCS)}")
    funcs = []
    for name in names:
        if name in REWARD_FUNCS:
            funcs.append(REWARD_FUNCS[name])
        elif name == EPISODE_REWARD:
            from fleet_rl.env.trl_environment import refinement_reward  # imports openenv: only when asked

            funcs.append(refinement_reward)
        elif "." in name:
            funcs.append(_import_dotted(name))
        else:
            raise ValueError(
                f"unknown reward function {name!r}; valid names: {', '.join(REWARD_FUNCS)}, "
                f"{EPISODE_REWARD}, or a dotted import path such as "
                "my_package.my_module.my_reward"
            )
    return funcs
