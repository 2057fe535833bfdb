"""What training costs and survives: where a GRPO step's time goes (``step_time``), the prompt's tokens per
style (``prompt_tokens``), a run killed and resumed again and again (``kill_resume``)."""
