"""The documentation of the skill `agent` object (skills/api.py) for prompts: one truthful line per
public attribute, and Crafter's skill API text built from them."""

from __future__ import annotations

import textwrap

# Name -> one-line truthful description of every public agent attribute, in the order to show. The skill
# API text renders it (render_agent_doc); a test checks it names exactly CrafterAgent's public attributes.
AGENT_API_DOC: dict[str, str] = {
    "agent.position": "(x, y) of the player. The world is 64 x 64 cells: x is the column 0..63 and grows to the "
                      "right, y is the row 0..63 and grows downward (move_up is y - 1); episodes start at (32, 32)",
    "agent.facing": "(dx, dy) the player faces: (-1, 0) left, (1, 0) right, (0, -1) up, (0, 1) down",
    "agent.inventory": "dict item -> count of every item the game has (the items of the rules below; status "
                       "values are separate)",
    "agent.health, agent.food, agent.drink, agent.energy": "0..9 each",
    "agent.sleeping, agent.daylight": "bool; 0.0 (night) .. 1.0 (day)",
    "agent.achievements": "sorted list of the achievements unlocked so far this episode, as names "
                          "(see the rules below)",
    "agent.view": "7 rows x 9 columns of cell names around the player, view[row][column]; the player is at "
                  "view[3][4], so view[3 + dy][4 + dx] is the cell (x + dx, y + dy). Names: the materials of the "
                  "rules below, creatures and objects cow zombie skeleton arrow plant fence player, and out_of_map "
                  "for cells beyond the map edge",
    "agent.facing_cell()": "name of the cell the player faces now, from the current view (out_of_map at the edge)",
    "agent.look(direction)": "name of the cell next to the player in direction 'left', 'right', 'up' or 'down', "
                             "from the current view",
    "agent.is_free(direction)": "True if that neighbouring cell is grass, sand or path with no creature or object "
                                "on it, i.e. a move that way steps onto it (lava would too, and kills: never free)",
    "agent.face(direction)": "the move action toward direction: it turns the player that way and, when that cell "
                             "is free, also steps onto it; toward a blocked cell it only turns",
    "agent.sees(name)": "True if name is in the current view",
    "agent.at(x, y)": "name last seen at (x, y) (the memory of the map: what the whole episode has shown, "
                      "earlier skills' runs too; creatures, plants and arrows only as this skill run saw them); "
                      "'out_of_map' outside 0..63; None if never seen",
    "agent.nearest(name)": "(x, y) of the remembered cell holding name with the fewest |dx| + |dy| (obstacles "
                           "ignored; ties: smaller y, then smaller x), or None",
    "agent.path_to(x, y)": "list of move actions over remembered free cells that ends next to (x, y) facing it "
                           "([] when already facing it; if (x, y) is itself free, the last move steps onto it), or "
                           "None when no path over seen cells is known",
    "agent.step_to(name)": "next move toward the remembered name with the shortest known path, ending next to it "
                           "and facing it; None when already facing one. It keeps that target until it is reached, "
                           "gone or clearly farther than another; a creature in the only way is bumped (which only "
                           "turns: it waits) rather than given up on. When no name is remembered or reachable it "
                           "returns explore()",
    "agent.explore()": "a move toward the nearest reachable free cell that borders cells never seen inside the map; "
                       "it keeps that goal until the area is seen. Walled in, it digs its way out: it faces and "
                       "returns 'do' on cells that 'do' turns into free ground with the tools held (e.g. stone "
                       "with a wood_pickaxe); 'noop' when nothing reachable is left unseen",
    "agent.needs(name)": "what making, placing or collecting name needs, from the world's rules: a dict "
                         "{'action', 'uses', 'holds', 'nearby', 'faced', 'gives'} (item -> count "
                         "dicts, name lists); name is an item, an action or an achievement; None when no rule "
                         "covers it",
    "agent.missing(name)": "list of what stops name from working here and now, in words (items short, no table "
                           "nearby, facing the wrong cell); [] when it would work",
    "agent.can(name)": "True when name (an action, an item or an achievement) would work here and now",
    "agent.steps": "frames this skill has run so far",
    "agent.actions": "tuple of every action name",
}


CRAFTER_SKILL_API = '''\
A skill is a Python generator function that takes `agent` and yields Crafter action names, one per
game step (each yield is one frame). It stops when it returns.

    def skill(agent):
        # Walk next to the nearest sand cell and face it, exploring until one has been seen.
        while True:
            action = agent.step_to("sand")   # a move; explores while no sand has been seen
            if action is None:               # next to a sand cell, facing it
                return
            yield action

The `agent` object:
'''


def render_agent_doc(doc: dict[str, str], width: int = 104) -> str:
    """AGENT_API_DOC as prompt text: one "name -> description" entry per attribute, wrapped."""
    lines = []
    for name, text in doc.items():
        lines.append(textwrap.fill(f"{name} -> {text}", width, subsequent_indent="    "))
    return "\n".join(lines) + "\n"


CRAFTER_SKILL_API += render_agent_doc(AGENT_API_DOC)
