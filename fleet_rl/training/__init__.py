"""Training side of the pipeline: script arguments, datasets, option checks, model backends, the SFT warm
start and held-out evaluation. ``train_grpo.py`` at the repository root reads them top to bottom."""
