"""Sample Factory's end-of-run profile trees and FPS line, parsed from a training log and summed by kind."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")
LOG_PREFIX_RE = re.compile(r"^\[[^\]]*\]\[\s*\d+\]\s*")
TREE_START_RE = re.compile(r"(?P<name>\S.*?) profile tree view:\s*$")
TREE_ITEM_RE = re.compile(r"^(?P<key>[\w\-. ]+?): (?P<value>[-+0-9.eE]+)$")
SF_FPS_RE = re.compile(r"Collected \{(?P<steps>[^}]*)\}, FPS: (?P<fps>[0-9.]+)")


def parse_sf_profiles(text: str) -> dict[str, Any]:
    """Sample Factory's end-of-run profile trees (one per component) and its own FPS line, from the log."""
    trees: dict[str, dict[str, float]] = {}
    raw: dict[str, list[str]] = {}
    current: str | None = None
    stack: list[str] = []
    sf_fps: dict[str, Any] = {}
    for line in ANSI_RE.sub("", text).splitlines():
        body = LOG_PREFIX_RE.sub("", line)
        start = TREE_START_RE.search(body)
        if start:
            current, stack = start.group("name").strip(), []
            trees[current], raw[current] = {}, []
            continue
        fps = SF_FPS_RE.search(body)
        if fps:
            sf_fps = {"collected": fps.group("steps"), "fps": float(fps.group("fps"))}
        if current is None:
            continue
        if not line.strip() or line.startswith("[") or body != line:
            current = None  # a new log record ends the tree's message
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 2
        tokens = [token.strip() for token in line.strip().split(", ")]
        items = [m for token in tokens if (m := TREE_ITEM_RE.match(token))]
        if not items:
            current = None
            continue
        raw[current].append(line.rstrip())
        for match in items:
            path = "/".join([*stack[:depth], match.group("key")])
            trees[current][path] = float(match.group("value"))
        if len(items) == 1:
            # A lone entry may be the parent of the next, deeper lines (leaves come first at each level).
            stack = [*stack[:depth], items[0].group("key")]
    return {"trees": trees, "raw": raw, "sf_fps": sf_fps}


def summarise_profile(profile: dict[str, Any]) -> dict[str, float]:
    """The main costs, in seconds, summed over components of a kind (SF reports the first and last worker)."""
    trees: dict[str, dict[str, float]] = profile.get("trees", {})
    out: Counter[str] = Counter()
    rollout = [t for name, t in trees.items() if name.startswith("RolloutWorker")]
    inference = [t for name, t in trees.items() if name.startswith("InferenceWorker")]
    learner = [t for name, t in trees.items() if name.startswith("Learner")]
    out["rollout_workers_reported"] = len(rollout)
    for tree in rollout:
        for key in ("env_step", "overhead", "wait_for_trajectories", "enqueue_policy_requests",
                    "complete_rollouts", "save_policy_outputs"):
            out[f"rollout/{key}"] += tree.get(key, 0.0)
    for tree in inference:
        for key, value in tree.items():
            leaf = key.rsplit("/", 1)[-1]
            if leaf in ("forward", "deserialize", "stack", "obs_to_device_normalize", "prepare_outputs",
                        "send_messages", "update_model", "wait_policy_total"):
                out[f"inference/{leaf}"] += value
    for tree in learner:
        for key, value in tree.items():
            leaf = key.rsplit("/", 1)[-1]
            if key in ("train", "prepare_batch", "misc") or leaf in ("update", "calculate_losses",
                                                                       "losses_postprocess", "kl_divergence",
                                                                       "after_optimizer", "minibatch_init"):
                out[f"learner/{leaf}"] += value
    for name, tree in trees.items():
        if name.startswith("Runner"):
            out["runner/main_loop"] = tree.get("main_loop", 0.0)
    return dict(out)

