"""The state of a template (the process a worker's children are forked from) that another
process of the same user can change from outside: resource limits (``prlimit``), the CPU
affinity (``sched_setaffinity``), the niceness (``setpriority``) and the scheduling
policy (``sched_setscheduler``). A kernel can reach its worker's parent so, and every
child forked after would inherit the change. A
:class:`~pytest_xtc.core.workers.isolation.Worker` takes this state when it is made and,
before each fork, raises back what was lowered since (:func:`restore`)."""

from __future__ import annotations

import contextlib
import os
import resource
from dataclasses import dataclass, replace

_INFINITY = resource.RLIM_INFINITY
#: each limit once (RLIMIT_OFILE is RLIMIT_NOFILE), by its usual name
_NAMES = {getattr(resource, n): n for n in sorted(dir(resource), reverse=True)
          if n.startswith("RLIMIT_")}
_LIMITS = tuple(sorted(_NAMES))


#: The scheduling policy this template's children run cases under, when it took another
#: for itself (:func:`relay_quietly`); None: theirs is its own.
_case_policy: int | None = None


def relay_quietly() -> None:
    """Let this template (an adapter's host, relaying between pytest and its cases) wake
    without preempting the process that woke it: ``SCHED_BATCH``, taken only from the
    default policy. Each report a case's process sends up wakes the host; under the
    default policy the host then took the CPU from the case (its compile, its kernel)
    until it had passed the report on. The case's own process goes back to the default
    policy as it starts (:func:`case_policy`): the kernel runs as the user's would."""
    global _case_policy
    if not hasattr(os, "SCHED_BATCH") or os.sched_getscheduler(0) != os.SCHED_OTHER:
        return  # another platform, or the user's own choice of policy: kept
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except OSError:
        return
    _case_policy = os.SCHED_OTHER


def case_policy(born: Reachable) -> Reachable:
    """In a child just forked from a template whose state was ``born``: the policy its
    cases run under (see :func:`relay_quietly`); where it may not take it back (a policy
    set from outside, no privilege), the one it has: a timing is then slower, never a
    verdict changed. Returns the state it must keep until its case comes: ``born``, with
    the policy it took (see :func:`reached`)."""
    global _case_policy
    if _case_policy is None:
        return born
    with contextlib.suppress(OSError):
        os.sched_setscheduler(0, _case_policy, os.sched_param(0))
    _case_policy = None
    return replace(born, policy=os.sched_getscheduler(0),
                   priority=os.sched_getparam(0).sched_priority)


def reached(expected: Reachable) -> bool:
    """Whether this process's niceness, CPUs or scheduling policy differ from
    ``expected``: set from outside (a process of the same user may renice, pin or
    deprioritize another; its limits only the fence's ``prlimit`` rule keeps)."""
    now = take()
    return (now.niceness, now.affinity, now.policy, now.priority) != \
        (expected.niceness, expected.affinity, expected.policy, expected.priority)


class TemplateChanged(RuntimeError):
    """Something outside lowered the template's limits, and it cannot raise them back."""


@dataclass(frozen=True)
class Reachable:
    limits: tuple[tuple[int, int, int], ...]  # (resource, soft, hard)
    affinity: frozenset[int] | None
    niceness: int
    policy: int | None  # the scheduling policy (None: not on this platform)
    priority: int  # its static priority (0 but for the real-time policies)


def take() -> Reachable:
    """This process's reachable state now."""
    limits = tuple((r, *resource.getrlimit(r)) for r in _LIMITS)
    affinity = (frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                else None)
    scheduled = hasattr(os, "sched_getscheduler")
    policy = os.sched_getscheduler(0) if scheduled else None
    priority = os.sched_getparam(0).sched_priority if scheduled else 0
    return Reachable(limits, affinity, os.getpriority(os.PRIO_PROCESS, 0), policy, priority)


def _below(value: int, then: int) -> bool:
    if value == _INFINITY:
        return False
    return then == _INFINITY or value < then


def restore(baseline: Reachable) -> list[str]:
    """Raise back what was lowered since ``baseline`` (a limit, the CPUs, the priority);
    what was restored, a line each. Raises :class:`TemplateChanged` naming the limits
    that cannot be raised back (a hard limit, without the privilege)."""
    now = take()
    if now == baseline:
        return []
    done, stuck = [], []
    for (limit, soft, hard), (_, was_soft, was_hard) in zip(now.limits, baseline.limits,
                                                             strict=True):
        if not (_below(soft, was_soft) or _below(hard, was_hard)):
            continue
        name = _NAMES[limit]
        want = (was_soft if _below(soft, was_soft) else soft,
                was_hard if _below(hard, was_hard) else hard)
        try:
            resource.setrlimit(limit, want)
            done.append(f"{name} lowered from outside to {soft}/{hard}: raised back")
        except (OSError, ValueError):
            stuck.append(f"{name} {soft}/{hard} (was {was_soft}/{was_hard})")
    if baseline.affinity is not None and now.affinity is not None \
            and not baseline.affinity <= now.affinity:
        try:
            os.sched_setaffinity(0, baseline.affinity)
            done.append(f"CPU affinity narrowed from outside to {sorted(now.affinity)}: "
                        "restored")
        except OSError as exc:  # a CPU taken offline meanwhile: run on what is left
            done.append(f"CPU affinity narrowed from outside to {sorted(now.affinity)} "
                        f"and not restored ({exc.strerror}): timings may be slower")
    if now.niceness > baseline.niceness:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, baseline.niceness)
            done.append(f"niceness raised from outside to {now.niceness}: restored")
        except OSError:
            done.append(f"niceness raised from outside to {now.niceness} and not lowered "
                        "back (no privilege): timings may be slower")
    if (now.policy, now.priority) != (baseline.policy, baseline.priority) \
            and baseline.policy is not None:
        try:
            os.sched_setscheduler(0, baseline.policy, os.sched_param(baseline.priority))
            done.append(f"scheduling policy set from outside to {now.policy}: restored")
        except OSError:
            done.append(f"scheduling policy set from outside to {now.policy} and not "
                        "restored (no privilege): timings may be slower")
    if stuck:
        raise TemplateChanged(
            "the worker's template process had its limits lowered from outside (by a "
            f"case's process?) and cannot raise them back: {'; '.join(stuck)}; run the "
            "session again")
    return done
