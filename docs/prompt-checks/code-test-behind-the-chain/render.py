"""Renders the fast agent's code prompt for a link tested behind its chain (run 3's plan), for a prompt check."""
import json, sys
sys.path.insert(0, "tests")
from describe_support import recorded_describe
from rlgpt.v1 import common_pb2, planner_pb2
from services.planner.agents.fast import FastAgent
from services.planner.prompts import EvalProtocol
from services.planner.skill_library import SkillLibrary
from pathlib import Path

st = planner_pb2.SubTask(name="collect_iron_one", description="Find iron (in tunnels/mountains) and mine one with the stone pickaxe; keep drinking, eating and fighting as needed.",
                         success=[common_pb2.Condition(inventory=common_pb2.ItemCount(item="iron", count=1))])
fast = FastAgent.__new__(FastAgent)
fast.describe, fast.protocol, fast.library = recorded_describe(), EvalProtocol(), SkillLibrary(Path("/tmp/empty-lib.json"))
after = ["collect_wood_nine", "make_wood_pickaxe_with_table", "collect_stone_six", "make_stone_pickaxe_with_table",
         "make_stone_sword_with_table", "eat_cow_with_sword", "collect_coal_one"]
prompt = fast.skill_prompt(st, after=after)
Path("/work/exp/promptcheck/request.json").write_text(json.dumps({"messages": [{"role": "user", "content": prompt}], "answer_file": "/work/exp/promptcheck/answer.json", "how_to_answer": "Write only the JSON object the prompt asks for."}, indent=1))
print(len(prompt)); print(prompt[prompt.find("How the skill is tested"):][:1500])
