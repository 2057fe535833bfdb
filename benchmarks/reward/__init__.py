"""What the reward pays for: the answers that game it (``exploits``), whether it tells a group's answers
apart (``signal``), how far a scenario-blind template gets (``templates``) and what it told a training run
(``completions``)."""
