"""Many bots at once, one thread each, and a summary of how it went."""

from __future__ import annotations

import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from study.bots.client import AckLog
from study.bots.participant import DEFAULT_FACTS, Bot, Outcome, Profile, StudyFacts


@dataclass
class SwarmResult:
    """Every bot's outcome and the shared log of what the server acknowledged."""

    outcomes: list[Outcome]
    log: AckLog
    seconds: float
    errors: list[str] = field(default_factory=list)

    def latencies(self, event: str = "cookie") -> np.ndarray:
        """Seconds from sending to acknowledgement, over first-time acceptances."""
        return np.array([a.latency for a in self.log.acked
                         if a.event == event and not a.duplicate])

    def summary(self) -> str:
        steps = Counter(o.final_step or "?" for o in self.outcomes)
        behaviours = Counter(o.behaviour for o in self.outcomes)
        refused = Counter(reason for _, _, reason in self.log.refused)
        stopped = sum(o.stopped for o in self.outcomes)
        lines = [
            f"{len(self.outcomes)} bots in {self.seconds:.1f} s "
            f"({', '.join(f'{n} {b}' for b, n in sorted(behaviours.items()))})",
            "final steps: " + ", ".join(f"{s} {n}" for s, n in sorted(steps.items()))
            + (f" ({stopped} left at their stop point)" if stopped else ""),
            f"rounds {sum(o.rounds for o in self.outcomes)}, cookies accepted "
            f"{sum(o.cookies for o in self.outcomes)}, reconnects "
            f"{sum(o.reconnects for o in self.outcomes)}, messages acknowledged "
            f"{len(self.log.acked)}",
            "refused: " + (", ".join(f"{r} {n}" for r, n in sorted(refused.items())) or "none"),
        ]
        latencies = self.latencies()
        if len(latencies):
            p50, p95, p99 = np.percentile(latencies * 1000, [50, 95, 99])
            lines.append(f"cookie ack latency ms: p50 {p50:.1f}, p95 {p95:.1f}, p99 {p99:.1f}")
        lines += [f"error: {o.code}: {o.error}" for o in self.outcomes if o.error]
        return "\n".join(lines)


def bot_codes(count: int, prefix: str = "bot") -> list[str]:
    """Fresh participant codes for servers with open enrolment."""
    return [f"{prefix}{secrets.token_hex(5)}" for _ in range(count)]


def run_swarm(base_url: str, codes: list[str], profiles: list[Profile], *,
              facts: StudyFacts = DEFAULT_FACTS, max_seconds: float = 3600.0,
              stagger: float = 0.0, patience: float = 60.0, log: AckLog | None = None,
              stop: threading.Event | None = None) -> SwarmResult:
    """Run one bot per code concurrently until all finish (or ``max_seconds``);
    ``patience`` is how long a bot waits for an answer or a server that went away."""
    log = log or AckLog()
    stop = stop or threading.Event()
    bots = [Bot(base_url, code, profile, log, facts=facts, patience=patience,
                stop=stop.is_set)
            for code, profile in zip(codes, profiles, strict=True)]
    outcomes: list[Outcome | None] = [None] * len(bots)

    def work(index: int) -> None:
        outcomes[index] = bots[index].run(max_seconds)

    started = time.monotonic()
    threads = [threading.Thread(target=work, args=(i,), daemon=True, name=f"bot-{i}")
               for i in range(len(bots))]
    for thread in threads:
        thread.start()
        time.sleep(stagger)
    for thread in threads:
        thread.join(max(0.0, started + max_seconds + 30 - time.monotonic()))
    stop.set()
    finished = [o if o is not None else bots[i].outcome for i, o in enumerate(outcomes)]
    return SwarmResult(finished, log, time.monotonic() - started)
