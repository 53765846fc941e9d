"""bench-game's raw results (docs/bench-raw/game/<name>/results.json) and the numbers computed from them alone.

One file per scored run: the run (its id, seed, task, LLM, frames, LLM calls, tokens, wall time, copied from its
directory when it was scored), its final controller (kind, the code of every skill, each policy's checkpoint hash)
and its scorings, one per declared held-out set: the set (first world, episodes), when it was declared and
scored, the worlds it was checked apart from, the episode length, the game's achievements and one record per
episode (world, achievements unlocked, length, how it ended, death cause, return). The score and the 22 rates
are computed from the episodes by ``rlgpt/game_score.py``, never stored.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

from rlgpt.game_score import crafter_score, success_rates

ROOT = Path("docs/bench-raw/game")
RESULTS = "results.json"


def raw_file(root: Path, name: str) -> Path:
    return root / name / RESULTS


def _flat(record: dict[str, Any]) -> bool:
    """A record of scalars and lists of scalars (an episode's): one line of the file."""
    return not any(isinstance(v, dict) or (isinstance(v, list) and any(isinstance(x, dict | list) for x in v))
                   for v in record.values())


def _dumps(value: Any, depth: int = 0) -> str:
    """JSON indented by one space per level, each episode record on one line (so that a file of 256 episodes
    stays readable and diffs by episode)."""
    pad = " " * (depth + 1)
    if isinstance(value, dict) and value:
        items = [f"{pad}{json.dumps(k)}: {_dumps(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * depth + "}"
    if isinstance(value, list) and value and all(isinstance(v, dict) and _flat(v) for v in value):
        return "[\n" + ",\n".join(pad + json.dumps(v) for v in value) + "\n" + " " * depth + "]"
    if isinstance(value, list) and value and any(isinstance(v, dict | list) for v in value):
        return "[\n" + ",\n".join(pad + _dumps(v, depth + 1) for v in value) + "\n" + " " * depth + "]"
    return json.dumps(value)


def save(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(_dumps(doc) + "\n")
    tmp.replace(path)  # a crash never leaves half a raw file


def load_all(root: Path) -> list[dict[str, Any]]:
    """Every raw file under ``root``, by name."""
    return [json.loads(path.read_text()) for path in sorted(root.glob(f"*/{RESULTS}"))]


def scored(scoring: dict[str, Any]) -> bool:
    return scoring.get("status") == "scored" and bool(scoring.get("episodes"))


def numbers(scoring: dict[str, Any]) -> dict[str, Any]:
    """A scoring's numbers from its episodes alone: score, the rates (percent), episodes, mean length, how
    episodes ended and the death causes (most frequent first)."""
    episodes = scoring.get("episodes", []) if scored(scoring) else []
    rates = success_rates([e["achievements"] for e in episodes], scoring["achievements"])
    return {"score": crafter_score(rates), "rates": rates, "episodes": len(episodes),
            "mean_length": sum(e["length"] for e in episodes) / len(episodes) if episodes else math.nan,
            "ends": dict(Counter(e["end"] for e in episodes).most_common()),
            "deaths": dict(Counter(e["death_cause"] for e in episodes if e["death_cause"]).most_common())}


def episode_records(episodes: Any, first_seed: int) -> list[dict[str, Any]]:
    """Per episode (``EpisodeSummary`` protos, in world order): its world, the achievements it unlocked, its
    length, how it ended, why it died and its return, as the raw results keep them."""
    return [{"seed": first_seed + i, "achievements": list(dict.fromkeys(e.achievements)), "length": int(e.steps),
             "end": e.end_reason, "death_cause": e.death_cause, "return": round(float(e.episode_return), 3)}
            for i, e in enumerate(episodes)]
