"""How much work each measure does, in a full run and in a ``--quick`` one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sizes:
    """Task counts and durations; every measure reads its own fields."""

    repetitions: int
    throughput_tasks: int
    latency_samples: int
    lateness_tasks: int
    lateness_window: float
    backlog_tasks: int
    rate_lateness_tasks: int
    rate_lateness_window: float
    rate_lateness_lead: float
    memory_tasks: int
    idle_tasks: int
    idle_seconds: float
    cancel_tasks: int
    submit_pending_small: int
    submit_pending_large: int
    submit_batch: int
    cpu_tasks: int
    cpu_task_seconds: float
    head_of_line_tasks: int
    rate_seconds: float
    retry_tasks: int
    reschedule_waiting: int
    reschedule_calls: int
    calendar_series: int
    calendar_idle_seconds: float
    calendar_boundary_s: float
    calendar_lead_s: float
    calendar_boundary_repetitions: int
    key_lanes: int
    idle_lanes: int
    key_tasks: int
    limiter_keys: int
    limit_samples: int


FULL = Sizes(
    repetitions=5,
    throughput_tasks=100_000,
    latency_samples=2_000,
    lateness_tasks=10_000,
    lateness_window=2.0,
    backlog_tasks=100_000,
    rate_lateness_tasks=100_000,
    rate_lateness_window=2.0,
    rate_lateness_lead=3.0,
    memory_tasks=100_000,
    idle_tasks=100_000,
    idle_seconds=3.0,
    cancel_tasks=500_000,
    submit_pending_small=10_000,
    submit_pending_large=1_000_000,
    submit_batch=10_000,
    cpu_tasks=48,
    cpu_task_seconds=0.02,
    head_of_line_tasks=10_000,
    rate_seconds=10.0,
    retry_tasks=10_000,
    reschedule_waiting=100_000,
    reschedule_calls=1_000,
    calendar_series=10_000,
    calendar_idle_seconds=10.0,
    calendar_boundary_s=60.0,
    calendar_lead_s=15.0,
    calendar_boundary_repetitions=3,
    key_lanes=100_000,
    idle_lanes=1_000_000,
    key_tasks=200_000,
    limiter_keys=100_000,
    limit_samples=200,
)

QUICK = Sizes(
    repetitions=5,
    throughput_tasks=10_000,
    latency_samples=300,
    lateness_tasks=1_000,
    lateness_window=0.3,
    backlog_tasks=10_000,
    rate_lateness_tasks=10_000,
    rate_lateness_window=0.2,
    rate_lateness_lead=0.5,
    memory_tasks=5_000,
    idle_tasks=10_000,
    idle_seconds=0.5,
    cancel_tasks=25_000,
    submit_pending_small=500,
    submit_pending_large=50_000,
    submit_batch=1_000,
    cpu_tasks=8,
    cpu_task_seconds=0.015,
    head_of_line_tasks=2_000,
    rate_seconds=2.0,
    retry_tasks=1_000,
    reschedule_waiting=20_000,
    reschedule_calls=1_000,
    calendar_series=2_000,
    calendar_idle_seconds=2.0,
    calendar_boundary_s=1.0,
    calendar_lead_s=2.0,
    calendar_boundary_repetitions=5,
    key_lanes=10_000,
    idle_lanes=50_000,
    key_tasks=20_000,
    limiter_keys=5_000,
    limit_samples=50,
)

SEED = 20_240_601
"""One seed for every random choice, so that all contenders get the same delays and priorities."""

FAR_FUTURE = 3600.0
"""Delay in seconds of the tasks that are only there to be held (one hour: never due in a run)."""
