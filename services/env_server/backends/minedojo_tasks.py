"""The paper's MineDojo tasks (RL-GPT Table 1, the Plan4MC crafting chain) as TaskSpecs for the MineDojo backend.

Each task starts from an empty inventory in the open-ended world and succeeds when the inventory holds the item
(an inventory condition, so it counts however the item came: crafted, mined or picked up). Use one as the
``task`` of CreateSession / RunSkill / ResolveTask with ``backend="minedojo"``, e.g.
``minedojo_tasks.task_spec("wooden_pickaxe")``; ``TABLE1_TASKS`` lists them in the table's order.

"stone" is the table's row for mining stone: in Minecraft, stone mined with a pickaxe drops cobblestone, the
item the stone pickaxe and furnace are made of, so its condition is one cobblestone.
"""

from __future__ import annotations

from rlgpt.v1 import common_pb2

TABLE1_TASKS: dict[str, tuple[str, int]] = {
    "stick": ("stick", 1),
    "crafting_table": ("crafting_table", 1),
    "wooden_pickaxe": ("wooden_pickaxe", 1),
    "stone": ("cobblestone", 1),
    "stone_pickaxe": ("stone_pickaxe", 1),
    "furnace": ("furnace", 1),
    "bed": ("bed", 1),
}
"""Table 1 row -> (item, count) the inventory must hold."""


def task_spec(name: str) -> common_pb2.TaskSpec:
    """The TaskSpec of a Table 1 row (KeyError names the rows)."""
    if name not in TABLE1_TASKS:
        raise KeyError(f"no MineDojo Table 1 task {name!r}; known: {', '.join(TABLE1_TASKS)}")
    item, count = TABLE1_TASKS[name]
    return common_pb2.TaskSpec(
        name=f"obtain_{name}", description=f"RL-GPT Table 1 (MineDojo): obtain {count} {item}",
        terminate_on_success=True,
        success=[common_pb2.Condition(inventory=common_pb2.ItemCount(item=item, count=count))])


def task_specs() -> list[common_pb2.TaskSpec]:
    """Every Table 1 task, in the table's order."""
    return [task_spec(name) for name in TABLE1_TASKS]
