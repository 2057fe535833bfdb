"""The Agentic Kernel: a physically grounded, vectorised GPU-cluster simulator with an exact optimum.

    from fleet_rl.kernel import evaluate, evaluate_batch, solve
    ev = evaluate(scenario, plan_dict)   # never raises on a bad plan; ev.reasons, ev.reason_codes
    best = solve(scenario)               # best.plan, best.score == 1.0
    solved = solve_scenario(scenario)    # solve once (milliseconds), then score plans in microseconds:
    ev = evaluate(solved, plan_dict)     # every entry point takes a Scenario or its SolvedScenario

The physics and its simplifications are described in ``fleet_rl/kernel/simulate.py``; constants and their
sources in ``fleet_rl/kernel/constants.py``; the exactness argument of the solver in ``solver.py``.
"""

from fleet_rl.kernel.batch_scoring import evaluate, evaluate_batch, solve
from fleet_rl.kernel.reasons import ReasonCode
from fleet_rl.kernel.results import Evaluation, JobResult
from fleet_rl.kernel.solver import SolvedScenario, solve_scenario

__all__ = [
    "Evaluation",
    "JobResult",
    "ReasonCode",
    "SolvedScenario",
    "evaluate",
    "evaluate_batch",
    "solve",
    "solve_scenario",
]
