# --- collect_wood
def skill_0(agent):
    while agent.inventory.get("wood", 0) < 9:
        action = agent.step_to("tree")  # explores while no tree is known
        if action is None:
            if agent.facing_cell() == "tree":
                yield "do"
            else:
                yield agent.explore()
        else:
            yield action

# --- make_wood_pickaxe
def near_1(agent, name):
    return any(agent.view[3 + dy][4 + dx] == name for dx in (-1, 0, 1) for dy in (-1, 0, 1))


def place_near_1(agent, name, action):
    # place `action` (place_table / place_furnace) into a free faced cell unless `name` is nearby
    n = 0
    while not near_1(agent, name) and n < 80:
        n += 1
        if agent.facing_cell() in ("grass", "sand", "path") and agent.can(action):
            yield action
            continue
        moved = False
        for d in ("left", "right", "up", "down"):
            if agent.is_free(d):
                yield agent.face(d)
                moved = True
                break
        if not moved:
            yield agent.explore()


def skill_1(agent):
    tries = 0
    while "make_wood_pickaxe" not in agent.achievements and tries < 200:
        tries += 1
        if not near_1(agent, "table"):
            yield from place_near_1(agent, "table", "place_table")
            continue
        yield "make_wood_pickaxe"

# --- collect_stone
def skill_2(agent):
    while agent.inventory.get("stone", 0) < 6:
        action = agent.step_to("stone")  # explores while no stone is known
        if action is None:
            if agent.facing_cell() == "stone":
                yield "do"
            else:
                yield agent.explore()
        else:
            yield action

# --- make_stone_pickaxe
def near_3(agent, name):
    return any(agent.view[3 + dy][4 + dx] == name for dx in (-1, 0, 1) for dy in (-1, 0, 1))


def place_near_3(agent, name, action):
    # place `action` (place_table / place_furnace) into a free faced cell unless `name` is nearby
    n = 0
    while not near_3(agent, name) and n < 80:
        n += 1
        if agent.facing_cell() in ("grass", "sand", "path") and agent.can(action):
            yield action
            continue
        moved = False
        for d in ("left", "right", "up", "down"):
            if agent.is_free(d):
                yield agent.face(d)
                moved = True
                break
        if not moved:
            yield agent.explore()


def skill_3(agent):
    tries = 0
    walked = 0
    while "make_stone_pickaxe" not in agent.achievements and tries < 250:
        tries += 1
        if near_3(agent, "table"):
            yield "make_stone_pickaxe"
            continue
        if agent.sees("table") and walked < 12:
            action = agent.step_to("table")
            if action is not None:
                walked += 1
                yield action
                continue
        yield from place_near_3(agent, "table", "place_table")

# --- drink_water
def skill_4(agent):
    drank = 0
    while (drank == 0 or agent.drink < 9) and drank < 20:
        action = agent.step_to("water")  # explores while no water is known
        if action is None:
            if agent.facing_cell() == "water":
                drank += 1
                yield "do"
            else:
                yield agent.explore()
        else:
            yield action

# --- eat_cow
def skill_5(agent):
    n = 0
    while "eat_cow" not in agent.achievements and n < 400:
        n += 1
        if agent.facing_cell() == "cow":
            yield "do"
            continue
        action = agent.step_to("cow")  # explores while no cow is known
        if action is None:
            yield agent.explore()
        else:
            yield action

# --- collect_coal
VEC = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}


def diggable_6(agent, cell, name):
    if cell == name or cell == "tree":
        return True
    inv = agent.inventory
    if cell in ("stone", "coal") and inv.get("wood_pickaxe", 0) > 0:
        return True
    if cell == "iron" and inv.get("stone_pickaxe", 0) > 0:
        return True
    if cell == "diamond" and inv.get("iron_pickaxe", 0) > 0:
        return True
    return False


def dig_toward_6(agent, name, tx, ty):
    # one action toward (tx, ty), mining through blocking cells; None if stuck
    x, y = agent.position
    dx, dy = tx - x, ty - y
    dirs = []
    if dx:
        dirs.append("right" if dx > 0 else "left")
    if dy:
        dirs.append("down" if dy > 0 else "up")
    if abs(dy) > abs(dx):
        dirs.reverse()
    for d in dirs:
        if agent.is_free(d):
            return agent.face(d)
        if diggable_6(agent, agent.look(d), name):
            if tuple(agent.facing) == VEC[d]:
                return "do"
            return agent.face(d)  # blocked cell: only turns
    return None


def mine_6(agent, name, item, count):
    n = 0
    while agent.inventory.get(item, 0) < count and n < 600:
        n += 1
        if agent.facing_cell() == name:
            yield "do"
            continue
        target = agent.nearest(name)
        if target is not None and agent.path_to(target[0], target[1]) is None:
            action = dig_toward_6(agent, name, target[0], target[1])
            if action is not None:
                yield action
                continue
        action = agent.step_to(name)  # explores while none is known
        yield action if action is not None else agent.explore()


def skill_6(agent):
    yield from mine_6(agent, "coal", "coal", 1)

# --- collect_iron
VEC = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}


def diggable_7(agent, cell, name):
    if cell == name or cell == "tree":
        return True
    inv = agent.inventory
    if cell in ("stone", "coal") and inv.get("wood_pickaxe", 0) > 0:
        return True
    if cell == "iron" and inv.get("stone_pickaxe", 0) > 0:
        return True
    if cell == "diamond" and inv.get("iron_pickaxe", 0) > 0:
        return True
    return False


def dig_toward_7(agent, name, tx, ty):
    # one action toward (tx, ty), mining through blocking cells; None if stuck
    x, y = agent.position
    dx, dy = tx - x, ty - y
    dirs = []
    if dx:
        dirs.append("right" if dx > 0 else "left")
    if dy:
        dirs.append("down" if dy > 0 else "up")
    if abs(dy) > abs(dx):
        dirs.reverse()
    for d in dirs:
        if agent.is_free(d):
            return agent.face(d)
        if diggable_7(agent, agent.look(d), name):
            if tuple(agent.facing) == VEC[d]:
                return "do"
            return agent.face(d)  # blocked cell: only turns
    return None


def mine_7(agent, name, item, count):
    n = 0
    while agent.inventory.get(item, 0) < count and n < 600:
        n += 1
        if agent.facing_cell() == name:
            yield "do"
            continue
        target = agent.nearest(name)
        if target is not None and agent.path_to(target[0], target[1]) is None:
            action = dig_toward_7(agent, name, target[0], target[1])
            if action is not None:
                yield action
                continue
        action = agent.step_to(name)  # explores while none is known
        yield action if action is not None else agent.explore()


def skill_7(agent):
    yield from mine_7(agent, "iron", "iron", 1)

# --- make_iron_pickaxe
VEC = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}
OPEN = ("grass", "sand", "path")


def near_8(agent, name):
    return any(agent.view[3 + dy][4 + dx] == name for dx in (-1, 0, 1) for dy in (-1, 0, 1))


def keeps_8(agent, d, name):
    # after moving in direction d, is a `name` cell still within 1 cell?
    vx, vy = VEC[d]
    for ty in range(-3, 4):
        for tx in range(-4, 5):
            if agent.view[3 + ty][4 + tx] == name and abs(tx - vx) <= 1 and abs(ty - vy) <= 1:
                return True
    return False


def place_step_8(agent, action, i, stay=None):
    # one action toward placing `action` into the faced cell, staying next to `stay` if given
    fc = agent.facing_cell()
    if fc in OPEN and agent.can(action):
        return action
    if fc == "tree" or (fc == "stone" and agent.inventory.get("wood_pickaxe", 0) > 0):
        return "do"  # clears the faced cell into grass / path
    dirs = ["left", "up", "right", "down"]
    dirs = dirs[i % 4:] + dirs[:i % 4]
    for d in dirs:
        if agent.is_free(d) and (stay is None or keeps_8(agent, d, stay)):
            return agent.face(d)
    for d in dirs:
        if not agent.is_free(d) and agent.look(d) != "lava" and tuple(agent.facing) != VEC[d]:
            return agent.face(d)  # blocked: only turns
    return agent.explore()


def skill_8(agent):
    i = 0
    walked = 0
    while "make_iron_pickaxe" not in agent.achievements and i < 290:
        i += 1
        if not near_8(agent, "table"):
            if agent.sees("table") and walked < 12:
                action = agent.step_to("table")
                if action is not None:
                    walked += 1
                    yield action
                    continue
            yield place_step_8(agent, "place_table", i)
        elif not near_8(agent, "furnace"):
            yield place_step_8(agent, "place_furnace", i, "table")
        else:
            yield "make_iron_pickaxe"

# --- collect_diamond
VEC = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}
HARD = ("diamond", "tree", "stone", "coal", "iron")
ROCK = ("stone", "path", "tunnels")


def turn_do_9(agent, d):
    return "do" if tuple(agent.facing) == VEC[d] else agent.face(d)


def fight_9(agent):
    for d in VEC:
        if agent.look(d) in ("zombie", "skeleton"):
            return turn_do_9(agent, d)
    return None


def dig_9(agent, tx, ty):
    x, y = agent.position
    dirs = []
    if tx != x:
        dirs.append("right" if tx > x else "left")
    if ty != y:
        dirs.append("down" if ty > y else "up")
    if abs(ty - y) > abs(tx - x):
        dirs.reverse()
    for d in dirs:
        if agent.is_free(d):
            return agent.face(d)
        if agent.look(d) in HARD:
            return turn_do_9(agent, d)
    return None


def frontier_9(agent):
    # nearest remembered rock cell that borders never-seen cells
    x, y = agent.position
    for r in range(2, 13):
        for dx in range(-r, r + 1):
            for dy in ((-r, r) if abs(dx) < r else range(-r, r + 1)):
                cx, cy = x + dx, y + dy
                if agent.at(cx, cy) in ROCK and any(agent.at(cx + a, cy + b) is None for a, b in VEC.values()):
                    return cx, cy
    return None


def skill_9(agent):
    st = {"drink": False}
    while "collect_diamond" not in agent.achievements:
        a = fight_9(agent)
        if a is None:
            if agent.drink <= 4 and agent.nearest("water") is not None:
                st["drink"] = True
            if agent.drink >= 9:
                st["drink"] = False
            goal = "diamond"
            if st["drink"]:
                goal = "water"
            elif agent.food <= 3 and agent.sees("cow"):
                goal = "cow"
            t = agent.nearest(goal)
            if agent.facing_cell() == goal:
                a = "do"
            elif goal == "diamond":
                if t is not None and agent.path_to(*t) is None:
                    a = dig_9(agent, *t)
                elif t is None:
                    f = frontier_9(agent)
                    if f is not None:
                        a = dig_9(agent, *f)
            if a is None:
                a = agent.step_to(goal) or agent.explore()
        yield a


def skill(agent):
    yield from skill_0(agent)
    yield from skill_1(agent)
    yield from skill_2(agent)
    yield from skill_3(agent)
    yield from skill_4(agent)
    yield from skill_5(agent)
    yield from skill_6(agent)
    yield from skill_7(agent)
    yield from skill_8(agent)
    yield from skill_9(agent)
