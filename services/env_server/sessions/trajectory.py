"""The per-episode trajectory text of recording sessions (EpisodeSummary.text): what the critic and the
fast agent read about an episode.

One line per event, in order: compressed action runs ("move_left x12", "move_left/move_right x110 at
(0, 31), map edge"), events with their step and position ("step 57 at (12, 30): +1 wood; zombie seen
at (14, 28)"), health/food/drink/energy changes with their cause where the perception shows it, the
first sighting of each creature and of the task's targets ("watch" names) with whether a path to them
is known, the position every ``position_every`` steps when the player moved, and merged lines for
slow drifts ("steps 21-60: drink 9->7 (thirst)"). The text is bounded: the start and the end are kept
and the middle is replaced by "... (N lines omitted) ...".
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterable
from typing import Any

from services.env_server.sessions.trajectory_reading import (
    MOVE_STEPS,
    cell_text,
    distance,
    facing_name,
    moved_into,
    near,
    nearest_in_view,
    on_border,
    position_of,
    status_of,
    step_text,
)
from services.env_server.skills.api import CrafterAgent
from services.env_server.skills.navigation import OUT_OF_MAP

Cell = tuple[int, int]
CREATURES = ("cow", "zombie", "skeleton")
_NEEDS_CAUSE = {"food": "hunger", "drink": "thirst", "energy": "fatigue"}
_LOW = 2  # a need falling to this or below gets a line of its own at once
_STUCK_RUN = 6  # a run this long that stays within two cells says where and why
_PERIOD2_MIN = 4  # alternating actions compress from this many frames
_MAX_LINE = 300


@dataclasses.dataclass
class _Run:
    """The action pattern being accumulated: one action repeated, or two alternating."""

    pattern: tuple[str, ...]
    count: int
    positions: list[Cell]
    """Distinct positions during the run, up to three (more means the player got somewhere)."""
    edge: Cell | None = None
    """A position on the map border, or facing beyond it, during the run."""
    facing: str = ""

    def expected(self) -> str:
        return self.pattern[self.count % len(self.pattern)]


class TrajectoryRecorder:
    """Turns one episode's frames into bounded text. ``watch``: names of the task's targets to report."""

    def __init__(self, watch: Iterable[str] = (), *, position_every: int = 25, head_lines: int = 60,
                 tail_lines: int = 120, max_chars: int = 8000):
        self.watch = [w for w in dict.fromkeys(watch) if w]
        self.position_every = position_every
        self.max_chars = max_chars
        self._head: list[str] = []
        self._head_lines = head_lines
        self._tail: deque[str] = deque(maxlen=tail_lines)
        self._omitted = 0
        self._run: _Run | None = None
        self._passive: dict[tuple[str, str], list[int]] = {}  # (stat, cause) -> [first, last, from, to]
        self._seen: dict[str, tuple[int, Cell]] = {}  # creature or watch name -> (step, cell) first seen
        self._previous: dict[str, Any] = {}
        self._map: CrafterAgent | None = None  # the memory of the map, for "is there a path" (Crafter only)
        self._reported: Cell | None = None
        self._next_position = position_every

    # --- input ------------------------------------------------------------------------------------
    def start(self, perception: dict[str, Any], nearby: str, after: str = "") -> None:
        """The episode's first observation; ``after`` says what came before it (the session's prefix)."""
        self._previous = perception
        position = position_of(perception)
        self._reported = position
        if "view" in perception:
            self._map = CrafterAgent(["noop", *MOVE_STEPS])
            self._map._update(perception, 0)
        where = f"at {cell_text(position)}, " if position is not None else ""
        self._emit(f"start{f' {after}' if after else ''}: {where}"
                   + "; ".join([f"near {nearby}", *self._sightings(perception, position)]))

    def frame(self, step: int, action: str, perception: dict[str, Any], gained: dict[str, int],
              lost: dict[str, int], new: list[str]) -> None:
        """Records one frame: ``action`` was taken and led to ``perception`` (after the frame)."""
        previous, self._previous = self._previous, perception
        position = position_of(perception)
        if self._map is not None:
            self._map._update(perception, step)
        parts = [f"+{v} {k}" for k, v in gained.items()] + [f"-{v} {k}" for k, v in lost.items()]
        parts += [f"achievement {a}" for a in new]
        parts += self._status_changes(step, action, previous, perception)
        parts += self._sightings(perception, position, step)
        self._add_action(action, position, perception)
        if parts:
            self._flush()
            self._emit(f"{step_text(step, position)}: " + "; ".join(parts))
        elif step >= self._next_position:
            self._next_position = step + self.position_every
            run = self._run
            if run is not None and run.count >= _STUCK_RUN and len(run.positions) <= 2:
                self._reported = position  # a stuck run: its own line will say where, so do not cut it
            elif position is not None and (self._reported is None or distance(position, self._reported) >= 2):
                self._flush()
                self._emit(step_text(step, position))
                self._reported = position
        if parts and position is not None:
            self._reported = position

    def note(self, step: int, text: str) -> None:
        """A line of its own about what the session did at ``step`` (a guard took over, handed back)."""
        self._flush()
        self._emit(f"step {step}: {text}")

    # --- output -----------------------------------------------------------------------------------
    def watch_lines(self) -> list[str]:
        """One line per watched name: where it was first seen and whether a path to it is known now."""
        if self._map is None:
            return []  # this backend's perception has no map view: sightings cannot be told
        out = []
        for name in self.watch:
            if name not in self._seen:
                out.append(f"target {name}: never seen")
                continue
            step, cell = self._seen[name]
            line = f"target {name}: first seen at step {step} at {cell_text(cell)}"
            nearest = self._map.nearest(name)
            if nearest is None:
                line += ", gone from the map since"
            else:
                line += f", nearest now {cell_text(nearest)}, {self._reach(nearest)}"
            out.append(line)
        return out

    def text(self, closing: list[str]) -> str:
        """The bounded text: kept lines, the watch lines and ``closing`` (end, death, error: always kept)."""
        self._flush()
        head, tail = list(self._head), list(self._tail) + self.watch_lines()
        omitted = self._omitted
        closing = [line[:_MAX_LINE] for line in closing]

        def render() -> str:
            marker = [f"... ({omitted} lines omitted) ..."] if omitted else []
            return "\n".join(head + marker + tail + closing)

        text = render()
        while len(text) > self.max_chars and (head or tail):
            # Drop from the middle, keeping about a third of what remains at the start.
            if head and len(head) * 2 > len(tail):
                head.pop()
            else:
                tail.pop(0)
            omitted += 1
            text = render()
        return text[:self.max_chars]

    # --- internals --------------------------------------------------------------------------------
    def _emit(self, line: str) -> None:
        line = line[:_MAX_LINE]
        if len(self._head) < self._head_lines:
            self._head.append(line)
            return
        if len(self._tail) == self._tail.maxlen:
            self._omitted += 1
        self._tail.append(line)

    def _flush(self) -> None:
        """Writes out the pending action run, then the pending slow drifts."""
        if self._run is not None:
            self._emit_run(self._run)
            self._run = None
        if self._passive:
            first = min(v[0] for v in self._passive.values())
            last = max(v[1] for v in self._passive.values())
            steps = f"step {first}" if first == last else f"steps {first}-{last}"
            changes = [f"{stat} {v[2]}->{v[3]} ({cause})" for (stat, cause), v in self._passive.items()]
            self._emit(f"{steps}: " + "; ".join(changes))
            self._passive.clear()

    def _emit_run(self, run: _Run) -> None:
        if len(run.pattern) == 2 and run.count < _PERIOD2_MIN:
            for i in range(run.count):  # too short to be a pattern: one line per action
                self._emit(run.pattern[i % 2])
            return
        name = "/".join(run.pattern)
        line = name if run.count == 1 else f"{name} x{run.count}"
        if run.count >= _STUCK_RUN and run.positions and len(run.positions) <= 2:
            line += f" at {cell_text(run.edge or run.positions[0])}"
            if len(run.pattern) == 1 and run.facing and run.pattern[0] not in ("noop", "sleep"):
                line += ", map edge" if run.facing == OUT_OF_MAP else f", facing {run.facing}"
            elif run.edge:
                line += ", map edge"
        self._emit(line)

    def _add_action(self, action: str, position: Cell | None, perception: dict[str, Any]) -> None:
        run = self._run
        if run is not None and action == run.expected():
            run.count += 1
        elif run is not None and len(run.pattern) == 1 and run.count == 1:
            run.pattern, run.count = (run.pattern[0], action), 2
        elif run is not None and len(run.pattern) == 2 and run.count < _PERIOD2_MIN:
            # A short alternation broke: its last action may start the next run.
            last = run.pattern[(run.count - 1) % 2]
            for i in range(run.count - 1):
                self._emit(run.pattern[i % 2])
            self._run = _Run((last,) if action == last else (last, action), 2, run.positions[-1:])
            run = self._run
        else:
            if run is not None:
                self._emit_run(run)
            self._run = run = _Run((action,), 1, [])
        if position is not None and len(run.positions) < 3 and position not in run.positions:
            run.positions.append(position)
        facing = run.facing = facing_name(perception)
        if run.edge is None and position is not None and (facing == OUT_OF_MAP or on_border(position, perception)):
            run.edge = position

    def _status_changes(self, step: int, action: str, before: dict[str, Any], after: dict[str, Any]) -> list[str]:
        old, new = status_of(before), status_of(after)
        parts = []
        for stat, value in new.items():
            was = old.get(stat, value)
            if value == was:
                continue
            cause, passive = self._cause(stat, was, value, action, before, after)
            if passive:
                key = (stat, cause)
                entry = self._passive.setdefault(key, [step, step, was, value])
                entry[1], entry[3] = step, value
            else:
                parts.append(f"{stat} {was}->{value}" + (f" ({cause})" if cause else ""))
        return parts

    @staticmethod
    def _cause(stat: str, was: int, value: int, action: str, before: dict[str, Any],
               after: dict[str, Any]) -> tuple[str, bool]:
        """(cause, passive): a passive change is a slow drift, merged instead of breaking action runs."""
        needs = status_of(after)
        if stat in ("health", "life"):
            if value > was:
                return "regeneration", True
            # Crafter's damage sizes tell causes apart: a missing need costs 1, a zombie or an arrow 2 or more.
            drop, causes = was - value, []
            if moved_into(action, before) == "lava" and value <= 0:
                causes.append("walked into lava")
            elif drop >= 2 or value <= 0 or stat == "life":  # at 0 the last hit may have been cut short
                if near(before, "zombie", 1) or near(after, "zombie", 1):
                    causes.append("zombie adjacent" + (" while sleeping" if before.get("sleeping") else ""))
                if near(before, "arrow", 2) or near(after, "arrow", 1):
                    causes.append("arrow")
                elif not causes and near(after, "skeleton", 5):
                    causes.append("skeleton arrow")
            starving = [f"no {need}" for need in _NEEDS_CAUSE if needs.get(need, 1) <= 0]
            if starving and (drop % 2 == 1 or not causes):
                causes.append(" and ".join(starving))
            return ", ".join(causes) or "cause not seen", False
        if stat not in _NEEDS_CAUSE:
            return "", value > was
        if value < was:
            return _NEEDS_CAUSE[stat], value > _LOW
        if stat == "energy":
            return ("sleeping", True) if before.get("sleeping") or after.get("sleeping") else ("rested", False)
        if stat == "drink":
            return "drank water", False
        eaten = facing_name(before) if action == "do" else ""
        return (f"ate {eaten}" if eaten in ("cow", "plant") else "ate"), False

    def _sightings(self, perception: dict[str, Any], position: Cell | None, step: int = 0) -> list[str]:
        if "view" not in perception or position is None:
            return []
        parts = []
        for name in [*self.watch, *(c for c in CREATURES if c not in self.watch)]:
            if name in self._seen:
                continue
            cell = nearest_in_view(perception, name, position)
            if cell is None:
                continue
            self._seen[name] = (step, cell)
            text = f"{name} seen at {cell_text(cell)}"
            if name in self.watch and self._map is not None:
                text += f", {self._reach(cell)}"
            parts.append(text)
        return parts

    def _reach(self, cell: Cell) -> str:
        assert self._map is not None
        path = self._map.path_to(*cell)
        if path is None:
            return "no path over seen cells"
        return "reached" if not path else f"reachable in {len(path)} move{'s' if len(path) > 1 else ''}"
