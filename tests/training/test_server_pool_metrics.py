"""ServerPoolMetrics: the environment servers' health in every training log, ahead of the reporters."""

from __future__ import annotations

from types import SimpleNamespace

from fleet_rl.env.server_pool import ServerPool
from fleet_rl.training.callbacks import ServerPoolMetrics


def test_each_log_and_its_history_entry_get_the_pools_counters():
    pool = ServerPool(["http://a:8000", "http://b:8000"])
    callback = ServerPoolMetrics(pool)
    state = SimpleNamespace(log_history=[{"loss": 0.5, "step": 1}])
    logs = {"loss": 0.5}
    callback.on_log(None, state, None, logs=logs)
    assert logs == {"loss": 0.5, "env/failovers": 0, "env/healthy_servers": 2}
    assert state.log_history[-1] == {"loss": 0.5, "step": 1, "env/failovers": 0, "env/healthy_servers": 2}

    pool.mark_down("http://a:8000", "connection refused")
    pool.record_failover()
    logs = {"loss": 0.4}
    callback.on_log(None, SimpleNamespace(log_history=[]), None, logs=logs)
    assert logs["env/failovers"] == 1 and logs["env/healthy_servers"] == 1


def test_it_goes_ahead_of_the_reporters():
    reporter = object()
    trainer = SimpleNamespace(callback_handler=SimpleNamespace(callbacks=[reporter]))
    callback = ServerPoolMetrics(ServerPool(["http://a:8000"]))
    callback.first_in_line(trainer)
    assert trainer.callback_handler.callbacks == [callback, reporter]
