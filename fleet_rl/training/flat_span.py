"""When a group of answers to one prompt is flat: its rewards span less than ``FLAT_SPAN``.

GRPO's advantage is an answer's reward minus its group's mean, so a group whose rewards lie within 0.01 of
each other offers next to nothing to learn: unscaled, every advantage is under 0.01; scaled by the group's
std (TRL's ``scale_rewards: group``), that noise would be blown up to unit size. The reward-signal benchmark
(``benchmarks/reward_signal.py``) counts flat groups by this line, and ``resample_flat_groups``
(``fleet_rl/training/flat_group_resampling.py``) draws fresh prompts by it.
"""

FLAT_SPAN = 0.01
