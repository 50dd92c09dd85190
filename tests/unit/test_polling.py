"""We test these aspects of waiting on a moving cluster (`ocp_gpu_harness/polling.py`), no server:

- `wait_for` returns the first truthy value; an exception from the predicate is "not yet" (the
  wait goes on); a timeout names what was awaited, the last value, the last exception and how
  many polls raised it, and chains that exception; `pytest.fail` inside a predicate (a
  BaseException) ends the wait at once; the predicate is polled once more at the deadline;
- `holds_for` fails at the first falsy value, skips polls that raise, and fails when no poll
  could check anything;
and, as lint over the test sources (issue 30: a full CI run failed on a test, not the operator):
- no `sorted`/`min`/`max` over pods' `node_name` without a guard (a pod not yet bound has None,
  and None does not compare with a str: `TypeError` in the middle of a wait);
- no polling loop of its own (`while` ... `sleep`) in a test: `wait_for` polls on the real
  condition, `holds_for` watches a window; the few loops that remain say why below;
- no end-to-end wait with a literal timeout under 30 s (REACT_S, the least step's budget on a
  loaded machine: tests/e2e/conftest.py), and none with a bare number at all: each names its
  budget (REACT_S, START_S, STEP_S, READY_S, UPGRADE_S, or a constant of its module) or says
  beside the number why that number;
- no sleep in an end-to-end test but a window (what happens in it is the result, said beside
  it), the gap a test puts between two steps, or one listed with its reason: a wait polls the
  condition it waits for.
"""

from __future__ import annotations

import ast
import io
import itertools
import time
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

from ocp_gpu_harness import polling

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def test_returns_the_first_truthy_value() -> None:
    values = iter([None, [], 0, ["pod"]])
    assert polling.wait_for(lambda: next(values), 5, what="a pod", interval=0.001) == ["pod"]


def test_an_exception_is_not_yet() -> None:
    def unbound_then_bound() -> Iterator[list[str | None]]:
        yield [None, "node-a"]  # a pod the scheduler has not bound yet
        yield ["node-b", "node-a"]

    states = unbound_then_bound()
    found = polling.wait_for(lambda: sorted(next(states)), 5, what="both bound", interval=0.001)
    assert found == ["node-a", "node-b"]


def test_the_timeout_names_the_last_value_and_the_last_exception() -> None:
    calls = itertools.count()

    def flaky() -> int:
        n = next(calls)
        if n % 2:
            raise KeyError("status")
        return 0

    with pytest.raises(polling.WaitTimeout) as raised:
        polling.wait_for(flaky, 0.05, what="the status written", interval=0.001)
    message = str(raised.value)
    assert "timed out after 0.05s waiting for the status written" in message
    assert "last value 0" in message
    assert "KeyError: 'status'" in message
    assert isinstance(raised.value.__cause__, KeyError)
    # both: pytest shows a failure, and code catching the harness's timeouts catches it
    assert isinstance(raised.value, AssertionError) and isinstance(raised.value, TimeoutError)


def test_a_predicate_that_always_raises_says_so() -> None:
    def broken() -> bool:
        raise TypeError("'<' not supported between instances of 'NoneType' and 'str'")

    with pytest.raises(polling.WaitTimeout, match=r"raised on \d+ of them \(every poll\)") as raised:
        polling.wait_for(broken, 0.02, what="converged", interval=0.001)
    assert "last value" not in str(raised.value)


def test_pytest_fail_ends_the_wait_at_once() -> None:
    began = time.monotonic()
    with pytest.raises(pytest.fail.Exception):
        polling.wait_for(lambda: pytest.fail("invariant broken"), 30, what="x")
    assert time.monotonic() - began < 5


def test_polled_once_more_at_the_deadline() -> None:
    ready_at = time.monotonic() + 0.1
    # one poll before, then a sleep to the deadline, then the poll that sees it
    assert polling.wait_for(lambda: time.monotonic() >= ready_at, 0.2, what="ready", interval=10)


def test_holds_for_fails_at_the_first_falsy_value() -> None:
    values = iter([True, True, False, True])
    with pytest.raises(AssertionError, match="nothing deleted stopped holding: False"):
        polling.holds_for(lambda: next(values), 5, what="nothing deleted", interval=0.001)


def test_holds_for_skips_polls_that_raise_but_not_all_of_them() -> None:
    values = iter([True, KeyError("x"), True] + [True] * 1000)

    def check() -> bool:
        value = next(values)
        if isinstance(value, Exception):
            raise value
        return value

    # 0.5 s: room for the three polls that matter even on a loaded machine (0.02 s saw one at load 35).
    assert polling.holds_for(check, 0.5, what="quiet", interval=0.001) >= 2

    def never() -> bool:
        raise ConnectionError("refused")

    with pytest.raises(AssertionError, match="not one poll"):
        polling.holds_for(never, 0.02, what="quiet", interval=0.001)


# --- lint over the tests ------------------------------------------------------------------


def _test_sources() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if p.name != "test_polling.py")


def _mentions(node: ast.AST, attr: str) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == attr for n in ast.walk(node))


def unguarded_node_name_orders(source: str) -> list[int]:
    """Lines that order pods' `node_name`s without a guard against a pod not yet bound (None)."""
    found = []
    for call in ast.walk(ast.parse(source)):
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id in ("sorted", "min", "max")
            and call.args
            and isinstance(call.args[0], (ast.GeneratorExp, ast.ListComp, ast.SetComp))
        ):
            continue
        comp = call.args[0]
        element = comp.elt
        if not _mentions(element, "node_name"):
            continue
        # `p.spec.node_name or "<unbound>"`, or a filter on it, is a guard
        guarded = isinstance(element, ast.BoolOp) or any(
            _mentions(condition, "node_name") for generator in comp.generators for condition in generator.ifs
        )
        if not guarded:
            found.append(call.lineno)
    return found


def test_the_lint_finds_the_shape_that_crashed() -> None:
    crashed = "on_nodes = sorted(p.spec.node_name for p in driver_pods())\n"
    assert unguarded_node_name_orders(crashed) == [1]
    assert not unguarded_node_name_orders('sorted(p.spec.node_name or "" for p in pods)\n')
    assert not unguarded_node_name_orders("sorted(p.spec.node_name for p in pods if p.spec.node_name)\n")


def test_no_unguarded_order_of_node_names() -> None:
    found = {
        str(path.relative_to(ROOT)): lines
        for path in _test_sources()
        if (lines := unguarded_node_name_orders(path.read_text()))
    }
    assert not found, f"pods' node_name (None until bound) ordered without a guard: {found}"


# (file, function) -> why a loop that sleeps is not a poll that wait_for/holds_for would do
SLEEPING_LOOPS_ALLOWED = {
    ("tests/e2e/conftest.py", "_run"): "the node watch's resume after a cut connection (back-off)",
    ("tests/e2e/test_upgrade_adapters.py", "test_one_node_through_the_state_machine"): (
        "drives the passes itself: each turn runs one pass of the planner"
    ),
    ("tests/unit/test_demo_display.py", "test_a_pipe_gets_a_snapshot_only_when_it_changes"): (
        "a unit test of a display thread, no cluster"
    ),
    ("tests/unit/test_in_threads.py", "monitor"): "a unit test of a thread pool, no cluster",
    ("tests/unit/test_sending.py", "test_a_pooled_connection_the_server_closed_is_not_tried"): (
        "a unit test of a local socket server, no cluster"
    ),
}


def sleeping_loops(source: str) -> list[tuple[str, int]]:
    """(enclosing function, line) of every `while` loop that calls something's `sleep`."""
    tree = ast.parse(source)
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for loop in ast.walk(function):
            if isinstance(loop, ast.While) and any(
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "sleep"
                for call in ast.walk(loop)
            ):
                found.append((function.name, loop.lineno))
    # a loop in a nested function is also seen from the enclosing one: keep the innermost
    innermost: dict[int, str] = {}
    for name, line in found:
        innermost[line] = name
    return sorted((name, line) for line, name in innermost.items())


def test_no_polling_loop_of_its_own() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line} in {name}"
        for path in _test_sources()
        for name, line in sleeping_loops(path.read_text())
        if (str(path.relative_to(ROOT)), name) not in SLEEPING_LOOPS_ALLOWED
    ]
    assert not found, (
        "a loop that sleeps: poll with wait_for (or holds_for for 'nothing happens'), "
        f"or say in SLEEPING_LOOPS_ALLOWED why not: {found}"
    )


# The waits of the end-to-end tests and what argument holds their timeout (after `what` for the
# (what, check, timeout) helpers of test_harness.py and test_upgrade_adapters.py).
_WAITS = {"wait_for": 1, "wait_for_event": 3, "wait_http": 1}
# REACT_S in tests/e2e/conftest.py: the least any step needs on a loaded machine.
_LEAST_S = 30


def _timeout(call: ast.Call, name: str) -> ast.expr | None:
    """The timeout a wait call gives (None: the helper's default)."""
    index = _WAITS[name]
    if name == "wait_for" and call.args and isinstance(call.args[0], ast.Constant):
        index = 2  # wait_for(what, check, timeout)
    timeout = call.args[index] if len(call.args) > index else None
    for keyword in call.keywords:
        if keyword.arg == "timeout":
            timeout = keyword.value
    return timeout


def _number(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float))


def _waits(source: str) -> Iterator[tuple[ast.Call, ast.expr | None]]:
    """Every wait call of the source, with its timeout."""
    for call in ast.walk(ast.parse(source)):
        if isinstance(call, ast.Call):
            name = getattr(call.func, "id", getattr(call.func, "attr", None))
            if name in _WAITS:
                yield call, _timeout(call, name)


def short_waits(source: str) -> list[tuple[int, float]]:
    """(line, seconds) of every wait given a literal timeout under _LEAST_S."""
    return [
        (call.lineno, float(timeout.value))
        for call, timeout in _waits(source)
        if isinstance(timeout, ast.Constant) and _number(timeout) and timeout.value < _LEAST_S
    ]


def test_no_end_to_end_wait_shorter_than_a_loaded_machine_needs() -> None:
    assert short_waits('wait_for(lambda: x, 10, what="x")\n') == [(1, 10.0)]
    assert short_waits('wait_for("x", check, 5)\n') == [(1, 5.0)]
    found = {
        str(path.relative_to(ROOT)): lines
        for path in _test_sources()
        if "e2e" in path.parts or "olm" in path.parts
        if (lines := short_waits(path.read_text()))
    }
    assert not found, f"e2e waits under {_LEAST_S} s (see the budgets in tests/e2e/conftest.py): {found}"


# --- every e2e wait and window says its budget; no sleep stands in for a poll ---------------
# (issue 30: "no e2e timeout shorter than what the operator's own documented timings need on a
# loaded machine (state each one's budget next to it); no sleep used as synchronisation")


def _comments(source: str) -> dict[int, str]:
    """Line -> the comment on it."""
    return {
        token.start[0]: token.string
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    }


def _says(word: str, lines: list[str], comments: dict[int, str], node: ast.AST) -> bool:
    """A comment on the node's lines, or in the comment block just above it, says `word`."""
    first, last = node.lineno, node.end_lineno or node.lineno
    if any(word in comments.get(line, "").lower() for line in range(first, last + 1)):
        return True
    line = first - 1
    while line >= 1 and lines[line - 1].strip().startswith("#"):
        if word in lines[line - 1].lower():
            return True
        line -= 1
    return False


def unbudgeted_waits(source: str) -> list[int]:
    """Lines of waits whose timeout is a bare number with no comment giving its budget.

    A budget is a name (REACT_S, START_S, STEP_S, READY_S, UPGRADE_S in tests/e2e/conftest.py,
    or a constant of the module with its reason beside it), or the word "budget" in a comment
    on the call or just above it, saying why that number. No timeout: the helper's default,
    itself a budget (REACT_S)."""
    lines, comments = source.splitlines(), _comments(source)
    return [
        call.lineno
        for call, timeout in _waits(source)
        if _number(timeout) and not _says("budget", lines, comments, call)
    ]


# A window proves that something did NOT happen in it (holds_for, quiet_writes, a sleep the
# test then reads the audit log after): its length is the test's choice, said beside it.
_WINDOWS = {"holds_for": 1, "quiet_writes": 1}


def unexplained_windows(source: str) -> list[int]:
    """Lines of windows (and sleeps) given a number with no comment calling them a window.

    NB: a sleep is never a wait: what it waits for has a condition to poll (wait_for); only a
    window, in which what happens is the result, or the gap a test puts between two steps, may
    sleep. `sleep(0)` yields to the event loop and waits for nothing."""
    lines, comments = source.splitlines(), _comments(source)
    found = []
    for call in ast.walk(ast.parse(source)):
        if not isinstance(call, ast.Call):
            continue
        name = getattr(call.func, "id", getattr(call.func, "attr", None))
        if name == "sleep" and isinstance(call.func, ast.Attribute):
            seconds: ast.expr | None = call.args[0] if call.args else None
            if isinstance(seconds, ast.Constant) and seconds.value == 0:
                continue
        elif name in _WINDOWS:
            index = _WINDOWS[name]
            seconds = call.args[index] if len(call.args) > index else None
            for keyword in call.keywords:
                if keyword.arg == "seconds":
                    seconds = keyword.value
            if seconds is None or not _number(seconds):
                continue
        else:
            continue
        if not _says("window", lines, comments, call) and not _says("gap", lines, comments, call):
            found.append(call.lineno)
    return found


# (file, function) -> why a sleep in it is neither a wait nor a window
SLEEPS_ALLOWED = {
    **SLEEPING_LOOPS_ALLOWED,
    ("tests/e2e/test_lease_under_load.py", "scenario"): (
        "the subject: a pass that blocks the event loop for BLOCKED_S, while the lease must be renewed"
    ),
}


def _functions_of(source: str) -> dict[int, str]:
    """Line -> the innermost function around it."""
    owner: dict[int, tuple[int, str]] = {}
    for function in ast.walk(ast.parse(source)):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for line in range(function.lineno, (function.end_lineno or function.lineno) + 1):
                if line not in owner or function.lineno > owner[line][0]:
                    owner[line] = (function.lineno, function.name)
    return {line: name for line, (_, name) in owner.items()}


def _e2e_sources() -> list[Path]:
    return [path for path in _test_sources() if "e2e" in path.parts or "olm" in path.parts]


def test_the_lint_knows_a_budget_from_a_bare_number() -> None:
    assert unbudgeted_waits('wait_for(lambda: x, 60, what="x")\n') == [1]
    assert unbudgeted_waits('wait_for(lambda: x, STEP_S, what="x")\n') == []
    assert unbudgeted_waits('wait_for(lambda: x, what="x")\n') == []
    assert unbudgeted_waits('wait_for(lambda: x, 60, what="x")  # budget: a pull, 6 s quiet\n') == []
    assert unbudgeted_waits('# Budget 60 s: a pull, 6 s quiet.\nwait_for(lambda: x, 60, what="x")\n') == []
    assert unexplained_windows("time.sleep(2)\n") == [1]
    assert unexplained_windows("time.sleep(2)  # the window: nothing is written in it\n") == []
    assert unexplained_windows("await asyncio.sleep(0)\n") == []
    assert unexplained_windows('holds_for(lambda: x, 3, what="x")\n') == [1]
    assert unexplained_windows('holds_for(lambda: x, WINDOW_S, what="x")\n') == []


def test_every_end_to_end_wait_names_its_budget() -> None:
    found = {
        str(path.relative_to(ROOT)): lines
        for path in _e2e_sources()
        if (lines := unbudgeted_waits(path.read_text()))
    }
    assert not found, (
        "waits with a bare number: name a budget (tests/e2e/conftest.py) or say beside it why "
        f"that number ('budget'): {found}"
    )


def test_no_sleep_stands_in_for_a_poll() -> None:
    found = []
    for path in _e2e_sources():
        source = path.read_text()
        owners = _functions_of(source)
        relative = str(path.relative_to(ROOT))
        found += [
            f"{relative}:{line}"
            for line in unexplained_windows(source)
            if (relative, owners.get(line, "")) not in SLEEPS_ALLOWED
        ]
    assert not found, (
        "a sleep or a window without a reason: poll the condition with wait_for, or say why it "
        f"is a window (what must not happen in it), or list it in SLEEPS_ALLOWED: {found}"
    )
