"""Hand-written reference skills: the pure-code baseline, smoke tests and the `make run` demo.

They are written by people, not by the fast agent, and they are never shown to the LLM as few-shot
examples (they solve tasks the benchmarks evaluate).
"""

COLLECT_WOOD = '''\
def skill(agent):
    """Walk to the nearest tree and chop until 3 wood are held."""
    while agent.inventory["wood"] < 3:
        action = agent.step_to("tree")
        yield action if action is not None else "do"
'''

PLACE_TABLE = '''\
def skill(agent):
    """Collect wood, then place a crafting table next to the player."""
    while agent.inventory["wood"] < 2:
        action = agent.step_to("tree")
        yield action if action is not None else "do"
    for direction in ["left", "right", "up", "down"]:
        if agent.facing_cell() in ("grass", "sand", "path"):
            break
        yield agent.face(direction)
    yield "place_table"
'''

REFERENCE_SKILLS = {"collect_wood": COLLECT_WOOD, "place_table": PLACE_TABLE}
