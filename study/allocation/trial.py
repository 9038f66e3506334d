"""A goal reward given as code, tried in a child process before anything runs it.

A lab's function may call ``sys.exit()``, end its process, crash it or never return; run
in the command that checks it, it would end or stall that command (and a server) without
a word. Here it is imported and called in a child process of its own, each step under a
time limit, and whatever happens is said in words the protocol's ``python`` line carries.
The child is started with ``spawn`` (a fresh interpreter, safe under gevent's patching
and with threads running), so nothing of the parent's state leaks into the trial.
"""

from __future__ import annotations

import multiprocessing
import signal
from functools import lru_cache
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path

import numpy as np

from study.allocation.algorithms import code_sha256, goal_reward_code
from study.allocation.model import InvalidInput, code_goal_rewards, state_space

# Teams per call: enough for every goal to meet varied coefficients, few enough to take
# milliseconds. Each batch is drawn from its own seed and called twice, all batches once
# before any is called again, so a value that changes after a few calls, or with what
# was asked before, differs between a batch's two calls.
SAMPLE_TEAMS = 64
SAMPLE_SEED = 20_28
BATCHES = 3
CALLS = 2 * BATCHES
# The child's own start (an interpreter importing numpy) on a busy machine: not the
# lab's code, so not its time limit.
START_SECONDS = 120.0
_CONTEXT = multiprocessing.get_context("spawn")
_STOPS = "; that would end the command or the server running it"


def goal_reward_problem(source: str, humans: int, kits: tuple[int, ...], memory: bool,
                        folder: Path | None, seconds: float) -> str | None:
    """What is wrong with a goal reward given as code, tried in a child process on
    ``CALLS`` calls over sample teams of the protocol's size (with memory, earlier
    sessions' kits included), its import and each call within ``seconds``; None when it
    returns one finite value in [0, 1] per goal, the same for the same teams every time.
    Unchanged code (its file's digest) is not tried twice in one process."""
    digest = code_sha256(source, folder)
    where = None if folder is None else str(folder)
    if digest is None:  # no file to tell other code by: tried afresh
        return _trial(source, humans, tuple(kits), memory, where, seconds)
    return _remembered_trial(source, humans, tuple(kits), memory, where, seconds, digest)


@lru_cache(maxsize=64)
def _remembered_trial(source: str, humans: int, kits: tuple[int, ...], memory: bool,
                      folder: str | None, seconds: float, digest: str) -> str | None:
    """One trial per version of the code: a process reads its protocol more than once
    (and a server's workers forked from it inherit the answer)."""
    return _trial(source, humans, kits, memory, folder, seconds)


def _trial(source: str, humans: int, kits: tuple[int, ...], memory: bool,
           folder: str | None, seconds: float) -> str | None:
    """One trial in a fresh child, which is killed once it has answered or overrun."""
    receiving, sending = _CONTEXT.Pipe(duplex=False)
    child = _CONTEXT.Process(target=_try_in_child, name=f"goal reward {source}",
                             args=(sending, source, humans, kits, memory, folder))
    child.start()
    sending.close()  # the child's end: once the child is gone, reading ends at once
    try:
        return _watch(receiving, child, seconds)
    finally:
        receiving.close()
        if child.is_alive():
            child.kill()
        child.join()


def _watch(receiving: Connection, child: BaseProcess, seconds: float) -> str | None:
    """The child's report, read step by step: each step it announces has ``seconds``."""
    step: str | None = None
    while True:
        if not receiving.poll(START_SECONDS if step is None else seconds):
            if step is None:
                return f"could not be tried: no process started within {START_SECONDS:g} s"
            return (f"did not return within {seconds:g} s {step} (python_seconds = "
                    f"{seconds:g}; raise it if the code needs longer)")
        try:
            kind, text = receiving.recv()
        except EOFError:
            return _ended(child, step or "as its process started")
        if kind == "step":
            step = text
        else:
            return text or None


def _ended(child: BaseProcess, step: str) -> str:
    """How the child ended without reporting: an exit code, or the signal that killed it."""
    child.join()
    code = child.exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"crashed its process ({name}) {step}{_STOPS}"
    return f"ended its process (exit code {code}, as os._exit() does) {step}{_STOPS}"


def _try_in_child(sending: Connection, source: str, humans: int, kits: tuple[int, ...],
                  memory: bool, folder: str | None) -> None:
    """The trial itself, in the child: each step announced before it runs, then the
    problem found (empty: none)."""
    step = "while its module was imported"
    try:
        sending.send(("step", step))
        code = goal_reward_code(source, None if folder is None else Path(folder))
        batches = [sample_goal_allocations(humans, kits, memory, SAMPLE_SEED + k)
                   for k in range(BATCHES)]
        first: list[np.ndarray] = []
        for call in range(1, CALLS + 1):
            step = f"in call {call} of {CALLS} ({SAMPLE_TEAMS} teams)"
            sending.send(("step", step))
            values = code_goal_rewards(code, *batches[(call - 1) % BATCHES])
            if call <= BATCHES:
                first.append(values)
                continue
            problem = _changed(first[call - BATCHES - 1], values, call - BATCHES, call)
            if problem is not None:
                sending.send(("problem", problem))
                return
        sending.send(("problem", ""))
    except InvalidInput as error:
        sending.send(("problem", error.reason))
    except SystemExit as error:
        sending.send(("problem", f"called sys.exit({error.code!r}) {step}{_STOPS}"))
    except BaseException as error:  # whatever else stops the lab's code is its report
        sending.send(("problem", f"raised {type(error).__name__} {step}: {error}"))


def _changed(before: np.ndarray, after: np.ndarray, first_call: int,
             call: int) -> str | None:
    """The first team and goal whose value differs between two calls on the same teams."""
    differs = np.argwhere(before != after)
    if not len(differs):
        return None
    team, goal = (int(i) for i in differs[0])
    return (f"returned other values in call {call} of {CALLS} than in call {first_call} "
            f"for the same {SAMPLE_TEAMS} teams (team {team}, goal {goal}: "
            f"{float(before[team, goal])!r}, then {float(after[team, goal])!r}); a goal "
            "reward must be deterministic")


def sample_goal_allocations(humans: int, kits: tuple[int, ...], memory: bool,
                            seed: int = SAMPLE_SEED
                            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Teams ``c, p [B, h, n]`` drawn from [0.01, 0.99] and every goal's allocation
    ``[B, G, h, n]``; with memory, plus a random goal of an earlier session per team."""
    space = state_space(humans, kits)
    rng = np.random.default_rng(seed)
    shape = (SAMPLE_TEAMS, humans, len(kits))
    c, p = rng.uniform(0.01, 0.99, shape), rng.uniform(0.01, 0.99, shape)
    goals = space.goal_allocations
    allocations = np.broadcast_to(goals, (SAMPLE_TEAMS, *goals.shape))
    if memory:
        earlier = goals[rng.integers(len(goals), size=SAMPLE_TEAMS)]
        allocations = allocations + earlier[:, None]
    return c, p, allocations
