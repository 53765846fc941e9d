"""Skills that passed their tests, kept across runs and retrieved by text similarity for prompts."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import threading
import time
from collections import Counter
from pathlib import Path

_WORD = re.compile(r"[a-z0-9]+")


@dataclasses.dataclass
class LibrarySkill:
    """One stored skill."""

    name: str
    description: str
    code: str
    success_rate: float
    task: str
    created: float = dataclasses.field(default_factory=time.time)

    def text(self) -> str:
        return f"{self.name.replace('_', ' ')} {self.description} {self.task.replace('_', ' ')}"


def _vector(text: str) -> Counter[str]:
    return Counter(_WORD.findall(text.lower().replace("_", " ")))


def _cosine(a: Counter[str], b: Counter[str]) -> float:
    dot = sum(a[w] * b[w] for w in a.keys() & b.keys())
    norm = math.sqrt(sum(v * v for v in a.values())) * math.sqrt(sum(v * v for v in b.values()))
    return dot / norm if norm else 0.0


class SkillLibrary:
    """A JSON file of skills; a better skill of the same name replaces a worse one."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._skills: dict[str, LibrarySkill] = {}
        if path.exists():
            try:
                for doc in json.loads(path.read_text()):
                    skill = LibrarySkill(**doc)
                    self._skills[skill.name] = skill
            except (ValueError, TypeError) as exc:
                raise ValueError(f"skill library {path} is corrupt ({exc}); fix or remove it") from exc

    def add(self, skill: LibrarySkill) -> bool:
        """Stores the skill unless one of that name does at least as well; returns whether it was stored."""
        with self._lock:
            old = self._skills.get(skill.name)
            if old is not None and old.success_rate >= skill.success_rate:
                return False
            self._skills[skill.name] = skill
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(self._json())
            tmp.replace(self.path)
            return True

    def snapshot(self, path: Path) -> None:
        """Writes the library as it is now to ``path`` (a run keeps the library it started with, so that a
        replay of the run starts from the same skills)."""
        with self._lock:
            path.write_text(self._json())

    def _json(self) -> str:
        return json.dumps([dataclasses.asdict(s) for s in self._skills.values()], indent=1)

    def all(self) -> list[LibrarySkill]:
        with self._lock:
            return list(self._skills.values())

    def retrieve(self, query: str, k: int = 5) -> list[LibrarySkill]:
        """The ``k`` skills most similar to ``query`` (bag-of-words cosine), best first."""
        q = _vector(query)
        scored = sorted(((_cosine(q, _vector(s.text())), s.success_rate, s.name, s) for s in self.all()),
                        key=lambda t: (t[0], t[1], t[2]), reverse=True)
        return [s for score, _rate, _name, s in scored[:k] if score > 0]
