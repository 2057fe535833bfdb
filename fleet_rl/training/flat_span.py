"""When a group of answers to one prompt is flat: its rewards span less than ``FLAT_SPAN``.

GRPO's advantage is an answer's reward minus its group's mean, so a group whose rewards lie within 0.01 of
each other offers next to nothing to learn: unscaled, every advantage is under 0.01; scaled by the group's
std (TRL's ``scale_rewards: group``), that noise would be blown up to unit size. The reward-signal benchmark
counts flat groups by this line, and self-imitation keeps only an answer this far above its group's mean.
"""

FLAT_SPAN = 0.01
