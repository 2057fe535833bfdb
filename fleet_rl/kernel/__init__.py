"""The Agentic Kernel: a physically grounded, vectorised GPU-cluster simulator with an exact optimum.

    from fleet_rl.kernel import evaluate, evaluate_batch, solve
    ev = evaluate(scenario, plan_dict)   # never raises on a bad plan; ev.reasons, ev.reason_codes
    best = solve(scenario)               # best.plan, best.score == 1.0

The physics and its simplifications are described in ``fleet_rl/kernel/simulate.py``; constants and their
sources in ``fleet_rl/kernel/constants.py``; the exactness argument of the solver in ``solver.py``.
"""

from fleet_rl.kernel.batch_scoring import evaluate, evaluate_batch, solve
from fleet_rl.kernel.reasons import ReasonCode
from fleet_rl.kernel.results import Evaluation, JobResult

__all__ = ["Evaluation", "JobResult", "ReasonCode", "evaluate", "evaluate_batch", "solve"]
