"""Renders the two requests of the guards check on run 4's chain (README.md): `declare` (which guards the chain
needs, as a slow agent would declare them) and, once it is answered, `code` (one request per declared guard: the
fast agent's code prompt for that guard). Run from the repository root:

    python docs/prompt-checks/guards-run-4/render.py declare
    python docs/prompt-checks/guards-run-4/render.py code
    python docs/prompt-checks/guards-run-4/render.py revise NAME ERROR   # a guard's code refused: its revision prompt
    python docs/prompt-checks/guards-run-4/render.py assemble   # guards.json for make bench-validate --guards
"""
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, "tests")
from describe_support import recorded_describe  # noqa: E402

from rlgpt.v1 import planner_pb2  # noqa: E402
from services.planner.agents.fast import FastAgent  # noqa: E402
from services.planner.agents.texts import describe_env, rules_text  # noqa: E402
from services.planner.skill_library import SkillLibrary  # noqa: E402

HERE = Path("docs/prompt-checks/guards-run-4")
RUN = Path("docs/runs/claude-relay-collect_diamond-4")
MAX_GUARDS = 3
GUARD_RULES = """A guard is a coded skill that does not run as a link of the chain. It takes over from whichever
link's skill is running when its trigger holds; that skill waits, suspended with its locals, and goes on where it
was once the guard's skill returns (or has run the guard's max_frames frames). A trigger is a list of entries of
the observation vector, each below a value (or, with "above": true, above it); it holds while any entry does. It is
checked before every frame while a skill of the chain runs. A guard takes over when its trigger holds, no guard is
running and it is ready: every guard is ready at the start of each episode; a take-over makes it not ready, and it
is ready again once its trigger stops holding (so a guard that could not meet its need does not loop, and a
trigger that starts while another guard runs is not lost: it fires once that guard hands back). When several
could take over, the first listed does. A trigger names only the observation vector's labels (listed under "The
env")."""


def trigger(guard: dict) -> str:
    """A guard's trigger in words ("status/drink below 4 or world/daylight below 0.5")."""
    return " or ".join(f"{w['label']} {'above' if w.get('above') else 'below'} {w['value']:g}" for w in guard["when"])


def plan_text() -> str:
    plan = json.loads((RUN / "state.json").read_text())["plan"]
    return json.dumps({"subtasks": [{k: st[k] for k in ("name", "description", "success")}
                                    for st in plan["subtasks"]]}, indent=1)


def deaths_text() -> str:
    """The run's final evaluation (its own 32 worlds), as the slow agent's re-plan reads deaths: how many, by cause,
    before which link, after how many frames, and one episode's last lines per main cause."""
    state = json.loads((RUN / "state.json").read_text())
    final, links = state["final"], [st["name"] for st in state["plan"]["subtasks"]]
    failed = [e for e in final["failed"] if e["end_reason"] == "death"]
    causes = collections.Counter(k for e in failed for k in e["death_cause"].split(" and "))
    reached = {link["name"]: link for link in final["links"]}
    lines = [f"Final evaluation of the chain: {sum(final['successes'])} of {len(final['successes'])} episodes "
             f"reached the task; {len(failed)} died."]
    lines.append("Deaths by cause (an episode counts once per cause): "
                 + ", ".join(f"{k} {v}" for k, v in causes.most_common()))
    lines.append("Per link, episodes that reached it and that got it done: "
                 + "; ".join(f"{n} {reached[n]['reached']}/{reached[n]['succeeded']}" for n in links if n in reached))
    frames = sorted(e["steps"] for e in failed)
    lines.append(f"Frames at death: median {frames[len(frames) // 2]}, from {frames[0]} to {frames[-1]}.")
    shown = set()
    for e in failed:
        if "tail" not in e:
            continue
        main = e["death_cause"].split(" and ")[0]
        if main in shown:
            continue
        shown.add(main)
        lines.append(f"One episode that died of {e['death_cause']} at frame {e['steps']}, its last lines: "
                     + " | ".join(e["tail"][-8:]))
    return "\n".join(lines)


def vector_text(describe) -> str:  # noqa: ANN001
    field = next(f for f in describe.observation if f.name == "vector")
    return f"The observation vector's labels: {', '.join(field.labels)}. {field.description}."


def round_feedback(results: Path, baseline: Path) -> str:
    """What the guards did on the chain's 32 evaluation worlds, against the chain alone on the same worlds."""
    ours, alone = json.loads(results.read_text())["episodes"], json.loads(baseline.read_text())["episodes"]
    lines = [f"On the chain's 32 evaluation worlds the chain alone reached the task in {sum(e['diamond'] for e in alone)}"
             f"; with your guards in {sum(e['diamond'] for e in ours)}."]
    for label, episodes in (("alone", alone), ("with your guards", ours)):
        causes = collections.Counter(k for e in episodes if e["death_cause"] for k in e["death_cause"].split(" and "))
        steps = sorted(e["steps"] for e in episodes)
        lines.append(f"Deaths {label} (an episode counts once per cause): "
                     + ", ".join(f"{k} {v}" for k, v in causes.most_common()) + f"; median episode {steps[16]} frames.")
    lines.append("Episodes (of 32) that got each achievement, alone / with your guards: " + ", ".join(
        f"{a} {sum(a in e['achievements'] for e in alone)}/{sum(a in e['achievements'] for e in ours)}"
        for a in ("collect_stone", "collect_coal", "collect_drink", "wake_up", "collect_iron", "make_iron_pickaxe",
                  "collect_diamond")))
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for e in ours:
        for line in e["guard_lines"]:
            name = line.split("guard ", 1)[1].split(" ", 1)[0]
            for kind, word in (("take-overs", "takes over"), ("returned", " returned after "),
                               ("stopped at max_frames", "spent its"), ("failed", "failed after")):
                if word in line:
                    counts[name][kind] += 1
            if " after " in line and " frames" in line and "takes over" not in line:
                counts[name]["frames"] += int(line.split(" after ", 1)[1].split(" ", 1)[0])
            elif "spent its" in line:
                counts[name]["frames"] += int(line.split("spent its ", 1)[1].split(" ", 1)[0])
    for name, c in counts.items():
        lines.append(f"Guard {name}: {c['take-overs']} take-overs in 32 episodes; {c['returned']} returned, "
                     f"{c['stopped at max_frames']} stopped at max_frames, {c['failed']} failed; {c['frames']} frames "
                     "in all.")
    for e in ours[:2]:
        lines.append(f"Episode on world {e['seed']} with your guards ({e['steps']} frames, "
                     f"{e['death_cause'] or 'no death'}): guard lines: " + " | ".join(e["guard_lines"][:12]))
    return "\n".join(lines)


def declare(round_name: str = "") -> None:
    describe = recorded_describe()
    previous = ""
    if round_name:  # a later round: the guards declared before and what they did
        before = json.loads((HERE / "declare" / "answer.json").read_text())
        previous = ("\nYour guards so far (a fast agent wrote each one's code from its description):\n"
                    + json.dumps(before["guards"], indent=1) + "\n\nWhat they did:\n"
                    + round_feedback(HERE / "round1-own-worlds.json", HERE / "round0-own-worlds.json")
                    + "\n\nDeclare the guards again: keep, change or drop each (a guard kept under the same name "
                    "and description keeps its code; a changed description gets new code).\n")
    prompt = f"""You are the slow agent of RL-GPT, planning for the game {describe.display_name}. The chain below
(its sub-tasks are coded skills, run in order, each until its success conditions hold) plays the task
collect_diamond. It dies in most episodes. Declare guards for it: at most {MAX_GUARDS}.

{GUARD_RULES}

The env:
{describe_env(describe)}
{vector_text(describe)}

The game's rules:
{rules_text(describe)}

The chain (a fixed plan; you do not change it):
{plan_text()}

What its episodes showed:
{deaths_text()}
{previous}
For each guard give: name (snake_case), description (what its skill must do when it takes over, and when it is
done: a fast agent writes its code from this), when (a list of {{"label": <vector label>, "value": <number>, "above": <true|false>}}: it
holds while any entry is below its value, or above it with "above": true) and max_frames (the most frames one take-over may run,
1..10000). Answer with one JSON object only: {{"rationale": "...", "guards": [{{"name": ..., "description": ...,
"when": [...], "max_frames": ...}}]}}."""
    out = HERE / ("declare" + (f"-{round_name}" if round_name else ""))
    out.mkdir(exist_ok=True)
    (out / "request.json").write_text(json.dumps({
        "messages": [{"role": "user", "content": prompt}], "answer_file": str((out / "answer.json").resolve()),
        "how_to_answer": "Write only the JSON object the prompt asks for into answer_file."}, indent=1))
    print(len(prompt))


class GuardProtocol:
    """How a guard's skill is judged, in place of a link's test (the fast agent's `protocol` slot)."""

    def __init__(self, when: str, max_frames: int, links: list[str], others: str):
        rules = GUARD_RULES.split(" A trigger names only")[0]
        self.text = (f"This skill is a guard, not a link: it is never tested alone. Its trigger: {when}. {rules}\n"
                     f"The chain's links, in order: {', '.join(links)}. When your skill starts, the agent holds what "
                     "those links have made by then and remembers the map the episode has shown so far (agent.at). "
                     "Return as soon as the need is met: the link you interrupted then goes on where it was. After "
                     f"{max_frames} frames in one take-over your skill is stopped and the link goes on. The guard is "
                     "judged by how many episodes of the whole chain reach its goal (collect_diamond) with the guard, "
                     "against the chain alone, on the same worlds. The chain's guards, in order (yours among them): "
                     f"{others}.")

    def code_test(self, start, after) -> str:  # noqa: ANN001 - the EvalProtocol slot's signature
        return self.text


def code(revise: str = "", error: str = "") -> None:
    answer = json.loads((HERE / "declare" / "answer.json").read_text())
    links = [st["name"] for st in json.loads((RUN / "state.json").read_text())["plan"]["subtasks"]]
    others = "; ".join(f"{g['name']} (when {trigger(g)})" for g in answer["guards"])
    for guard in answer["guards"]:
        when = trigger(guard)
        fast = FastAgent.__new__(FastAgent)
        fast.describe, fast.library = recorded_describe(), SkillLibrary(Path("/tmp/guards-check-empty-lib.json"))
        fast.protocol = GuardProtocol(when, int(guard["max_frames"]), links, others)
        st = planner_pb2.SubTask(name=guard["name"], description=guard["description"])
        if revise and guard["name"] != revise:
            continue
        out = HERE / "code" / guard["name"]
        previous = json.loads((out / "answer.json").read_text())["code"] if revise else ""
        prompt = fast.skill_prompt(st, previous_code=previous, error=error)
        prompt = prompt.replace("Success when: none\n", "Success when: none (a guard returns once its need is met)\n", 1)
        out = out / "revision1" if revise else out
        out.mkdir(parents=True, exist_ok=True)
        (out / "request.json").write_text(json.dumps({
            "messages": [{"role": "user", "content": prompt}], "answer_file": str((out / "answer.json").resolve()),
            "how_to_answer": "Write only the JSON object the prompt asks for into answer_file."}, indent=1))
        print(guard["name"], len(prompt))


def code_round2() -> None:
    """Code requests for the round-2 guards whose description changed or that are new (a kept one keeps its code):
    the fast agent's prompt with the guard's previous code and what it did, where it had code."""
    declared = json.loads((HERE / "declare-round2" / "answer.json").read_text())["guards"]
    before = {g["name"]: g for g in json.loads((HERE / "guards.json").read_text())["guards"]}
    links = [st["name"] for st in json.loads((RUN / "state.json").read_text())["plan"]["subtasks"]]
    feedback = round_feedback(HERE / "round1-own-worlds.json", HERE / "round0-own-worlds.json")

    others = "; ".join(f"{g['name']} (when {trigger(g)})" for g in declared)
    for guard in declared:
        old = before.get(guard["name"])
        if old is not None and old["description"] == guard["description"]:
            print(guard["name"], "kept")
            continue
        fast = FastAgent.__new__(FastAgent)
        fast.describe, fast.library = recorded_describe(), SkillLibrary(Path("/tmp/guards-check-empty-lib.json"))
        fast.protocol = GuardProtocol(trigger(guard), int(guard["max_frames"]), links, others)
        st = planner_pb2.SubTask(name=guard["name"], description=guard["description"])
        prompt = fast.skill_prompt(st, previous_code=old["code"] if old else "",
                                   feedback=("What the chain's guards did last time:\n" + feedback) if old else "")
        prompt = prompt.replace("Success when: none\n", "Success when: none (a guard returns once its need is met)\n", 1)
        out = HERE / "code-round2" / guard["name"]
        out.mkdir(parents=True, exist_ok=True)
        (out / "request.json").write_text(json.dumps({
            "messages": [{"role": "user", "content": prompt}], "answer_file": str((out / "answer.json").resolve()),
            "how_to_answer": "Write only the JSON object the prompt asks for into answer_file."}, indent=1))
        print(guard["name"], len(prompt))


def revise_round2(name: str, error: str) -> None:
    """A round-2 guard's code refused at registration: its revision prompt (the previous code and the error)."""
    declared = {g["name"]: g for g in json.loads((HERE / "declare-round2" / "answer.json").read_text())["guards"]}
    links = [st["name"] for st in json.loads((RUN / "state.json").read_text())["plan"]["subtasks"]]

    guard = declared[name]
    others = "; ".join(f"{g['name']} (when {trigger(g)})" for g in declared.values())
    fast = FastAgent.__new__(FastAgent)
    fast.describe, fast.library = recorded_describe(), SkillLibrary(Path("/tmp/guards-check-empty-lib.json"))
    fast.protocol = GuardProtocol(trigger(guard), int(guard["max_frames"]), links, others)
    st = planner_pb2.SubTask(name=name, description=guard["description"])
    folder = HERE / "code-round2" / name
    previous = json.loads((folder / "answer.json").read_text())["code"]
    prompt = fast.skill_prompt(st, previous_code=previous, error=error)
    prompt = prompt.replace("Success when: none\n", "Success when: none (a guard returns once its need is met)\n", 1)
    out = folder / "revision1"
    out.mkdir(parents=True, exist_ok=True)
    (out / "request.json").write_text(json.dumps({
        "messages": [{"role": "user", "content": prompt}], "answer_file": str((out / "answer.json").resolve()),
        "how_to_answer": "Write only the JSON object the prompt asks for into answer_file."}, indent=1))
    print(name, len(prompt))


def assemble_round2() -> None:
    declared = json.loads((HERE / "declare-round2" / "answer.json").read_text())["guards"]
    before = {g["name"]: g for g in json.loads((HERE / "guards.json").read_text())["guards"]}
    guards = []
    for guard in declared:
        folder = HERE / "code-round2" / guard["name"]
        if (folder / "revision1" / "answer.json").exists():
            folder = folder / "revision1"
        code = (json.loads((folder / "answer.json").read_text())["code"] if (folder / "answer.json").exists()
                else before[guard["name"]]["code"])
        guards.append({"name": guard["name"], "description": guard["description"], "code": code,
                       "when": guard["when"], "max_frames": int(guard["max_frames"])})
    (HERE / "guards-round2.json").write_text(json.dumps({"written_by": WRITTEN_BY + "; round 2: the guards "
                                                         "declared again after what they did on the run's own 32 "
                                                         "evaluation worlds (declare-round2/, code-round2/)",
                                                         "guards": guards}, indent=1))
    print([g["name"] for g in guards])


WRITTEN_BY = ("Claude (Anthropic) as fresh helper agents, one per request, each told to read only its request file "
              "and to run no code: one declared the guards (declare/), one wrote each guard's code (code/<name>/)")


def assemble() -> None:
    declared = json.loads((HERE / "declare" / "answer.json").read_text())["guards"]
    guards = []
    for guard in declared:
        folder = HERE / "code" / guard["name"]
        written = json.loads(((folder / "revision1") if (folder / "revision1" / "answer.json").exists()
                              else folder).joinpath("answer.json").read_text())
        guards.append({"name": guard["name"], "description": guard["description"], "code": written["code"],
                       "when": guard["when"], "max_frames": int(guard["max_frames"])})
    (HERE / "guards.json").write_text(json.dumps({"written_by": WRITTEN_BY, "guards": guards}, indent=1))
    print([g["name"] for g in guards])


if __name__ == "__main__":
    {"declare": declare, "declare2": lambda: declare("round2"), "code2": code_round2, "assemble2": assemble_round2, "revise2": revise_round2,
     "code": code, "assemble": assemble, "revise": code}[sys.argv[1]](*sys.argv[2:])
