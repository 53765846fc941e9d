"""Plays run 4's chain with the guards of guards.json (or none) on the run's own final-evaluation worlds (32, the
worlds its final evaluation played: not validation, not held-out) and writes each episode's end, deaths, guard
take-overs and last lines to a JSON file: the feedback a re-declaration of the guards reads, as a run's whole-task
evaluation would give it. Run from the repository root:

    PYTHONPATH=. python docs/prompt-checks/guards-run-4/evaluate.py OUT.json [GUARDS.json | --no-guards]
"""
import json
import sys
from pathlib import Path

from benchmarks.bench_validate import read_guards
from benchmarks.crafter.run import start_env_servers
from benchmarks.game.controller import read_controller
from benchmarks.game.play import game_task, play, register
from rlgpt import worlds
from rlgpt.v1 import learner_pb2

HERE = Path("docs/prompt-checks/guards-run-4")
RUN = Path("docs/runs/claude-relay-collect_diamond-4")
EPISODES = 32

controller = read_controller(RUN, Path("runs/learner/jobs"))
chosen = next((a for a in sys.argv[2:] if a.endswith(".json")), str(HERE / "guards.json"))
doc, guards, code = read_guards(Path(chosen))
if "--no-guards" in sys.argv:
    guards = []
first = worlds.final_worlds(controller.seed)
servers, _ = start_env_servers(1, Path("/tmp/guards-check/logs"), {}, learner_pb2.RLConfig(backend="crafter"),
                               session_envs=EPISODES)
try:
    task, _ = game_task(servers[0].target)
    register(servers[0].target, {**controller.skills, **code})
    response = play(controller, servers[0].target, task, first, EPISODES, guards)
finally:
    servers[0].stop()
episodes = [{"seed": first + k, "steps": e.steps, "diamond": "collect_diamond" in e.achievements,
             "death_cause": e.death_cause, "achievements": list(e.achievements),
             "guard_lines": [line for line in e.text.splitlines() if " guard " in f" {line}"],
             "tail": e.text.splitlines()[-10:]} for k, e in enumerate(response.episodes)]
Path(sys.argv[1]).write_text(json.dumps({"first_seed": first, "guards": [g.skill for g in guards],
                                         "episodes": episodes}, indent=1))
print(sum(e["diamond"] for e in episodes), "of", len(episodes))
