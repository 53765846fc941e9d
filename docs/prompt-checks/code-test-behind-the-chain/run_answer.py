"""Runs the prompt check's answer behind run 3's chain prefix (its recorded skills), on a real env server."""
import json, sys
from pathlib import Path
from google.protobuf import json_format
from benchmarks.crafter.run import start_env_servers
from rlgpt.grpc_client import create_channel
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc, learner_pb2

run = Path("docs/runs/claude-relay-collect_diamond-3")
state = json.loads((run / "state.json").read_text())
plan = {st["name"]: st for st in state["plan"]["subtasks"]}
after = ["collect_wood_nine", "make_wood_pickaxe_with_table", "collect_stone_six", "make_stone_pickaxe_with_table",
         "make_stone_sword_with_table", "eat_cow_with_sword", "collect_coal_one"]
answer = json.loads(Path("/work/exp/promptcheck/answer.json").read_text())
servers, _ = start_env_servers(1, Path("/tmp/pc-logs"), {}, learner_pb2.RLConfig(backend="crafter"))
try:
    channel = create_channel(servers[0].target, default_timeout=600, wait_ready_seconds=60)
    stub = env_pb2_grpc.EnvServiceStub(channel)
    prefix = []
    for name in after:
        stub.RegisterSkill(env_pb2.RegisterSkillRequest(name=f"pc_{name}", code=state["subtasks"][name]["skill_code"], replace=True))
        success = [json_format.ParseDict(c, common_pb2.Condition()) for c in plan[name]["success"]]
        prefix.append(common_pb2.PrefixStep(skill=f"pc_{name}", success=success, max_frames=300))
    stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="pc_answer", code=answer["code"], replace=True))
    task = common_pb2.TaskSpec(name="collect_iron_one", success=[common_pb2.Condition(inventory=common_pb2.ItemCount(item="iron", count=1))])
    for label, kw in (("behind the chain", {"prefix": prefix}), ("alone, from the start items", {})):
        r = stub.RunSkill(env_pb2.RunSkillRequest(skill="pc_answer", episodes=16, seed=77, max_steps=300, task=task, **kw))
        print(label, r.success_rate, [e.end_reason or ("success" if e.success else "?") for e in r.episodes][:16],
              [e.error.message[:80] for e in r.episodes if e.HasField("error")][:2])
finally:
    servers[0].stop()
