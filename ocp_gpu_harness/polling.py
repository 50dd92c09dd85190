"""Waiting on a real condition of a moving cluster: the one poller of the tests and the harness.

A predicate reads objects that are in the middle of changing: a pod created but not yet bound to
a node (`spec.nodeName` None), an object being deleted (`deletionTimestamp` set, still listed),
a status the controller has not written yet (no `status`, or counts of an older generation), an
API server that answers 404/409/5xx for a moment, a CRD not yet served. A predicate should say
"not yet" for all of them (tests/unit/test_polling.py checks the shapes that crashed before), but
one that slips is not allowed to fail a test on a state the cluster was only passing through.

So `wait_for` treats an exception from the predicate as "not yet": it polls again and remembers
it. NB: a predicate with a bug (a typo, a wrong key) then fails at the timeout instead of at once,
and the failure says so: the message names the last value, the last exception with how many polls
raised it, and chains that exception, so its traceback is shown. A `pytest.fail`/`skip` or a
KeyboardInterrupt (BaseException, not Exception) still ends the wait at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final, TypeVar

T = TypeVar("T")

# How often to poll when the caller does not say: a pass of the operator takes tens of
# milliseconds on a quiet machine, and four reads a second cost the API server nothing.
DEFAULT_INTERVAL: Final = 0.25
# The longest repr of the last value a timeout message shows.
_SHOWN: Final = 1500


class WaitTimeout(AssertionError, TimeoutError):
    """The condition did not hold within the timeout.

    An AssertionError, so pytest reports a test failure rather than an error; a TimeoutError,
    so that code catching the harness's timeouts catches it."""


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + f"... ({len(text)} chars)"


def wait_for(
    predicate: Callable[[], T | None],
    timeout: float,
    *,
    what: str,
    interval: float = DEFAULT_INTERVAL,
) -> T:
    """Poll `predicate()` until it returns something truthy, and return that.

    An exception from the predicate counts as "not yet" (module docstring). The predicate is
    called at least once, and once more at the deadline however long the sleeps took (on a
    loaded machine a sleep can overrun by seconds). On timeout raises `WaitTimeout` naming
    `what`, the last value and the last exception."""
    __tracebackhide__ = True  # pytest shows the test's line, not this loop
    deadline = time.monotonic() + timeout
    polls = raised = 0
    last_value: object = None
    last_error: Exception | None = None
    last_error_poll = 0
    while True:
        polls += 1
        try:
            value = predicate()
        except Exception as error:  # a transient state: see the module docstring
            raised += 1
            last_error, last_error_poll = error, polls
            value = None
        else:
            last_value = value
            if value:
                return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        time.sleep(min(interval, remaining))
    message = f"timed out after {timeout:g}s waiting for {what}: {polls} polls"
    if raised < polls:
        message += f", last value {_shown(last_value)}"
    if last_error is not None:
        every = " (every poll)" if raised == polls else ""
        message += (
            f"; the predicate raised on {raised} of them{every}, last at poll {last_error_poll}: "
            f"{type(last_error).__name__}: {last_error}"
        )
    raise WaitTimeout(message) from last_error


def holds_for(
    predicate: Callable[[], object],
    seconds: float,
    *,
    what: str,
    interval: float = DEFAULT_INTERVAL,
) -> int:
    """Check that `predicate()` stays truthy for `seconds`: something must NOT happen meanwhile.

    Fails (AssertionError naming `what` and the value) at the first falsy value. A poll that
    raises saw nothing, neither way: it is skipped, and the check fails only if no poll at all
    saw the condition (then it checked nothing). Returns how many polls saw it hold.

    NB: a window, not a wait: it proves nothing happened within `seconds`, so `seconds` must
    exceed the time the thing would take to happen (the operator's reaction, loaded)."""
    __tracebackhide__ = True
    deadline = time.monotonic() + seconds
    seen = 0
    last_error: Exception | None = None
    while True:
        try:
            value = predicate()
        except Exception as error:  # a moment not observed: see the docstring
            last_error = error
        else:
            if not value:
                raise AssertionError(f"{what} stopped holding: {_shown(value)}")
            seen += 1
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        time.sleep(min(interval, remaining))
    if not seen:
        raise AssertionError(f"{what}: not one poll in {seconds:g}s could check it") from last_error
    return seen
