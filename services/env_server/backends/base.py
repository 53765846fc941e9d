"""The interface every environment backend implements, and the backend registry."""

from __future__ import annotations

import abc
import dataclasses
import importlib
from collections.abc import Callable
from importlib import metadata
from typing import Any

import numpy as np

from rlgpt.errors import FailedPrecondition, InvalidArgument, shown
from rlgpt.v1 import common_pb2


def package_version(distribution: str) -> str:
    """The installed version of ``distribution``, or "unknown" (named in a game's rules as their source)."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"

@dataclasses.dataclass(frozen=True)
class BackendSpec:
    """Static description of a backend: what Describe reports and what requests are checked against."""

    name: str
    actions: tuple[str, ...]
    """Primitive action names; index = action id."""
    achievements: tuple[str, ...]
    """Achievement names usable in success conditions."""
    items: tuple[str, ...]
    """Inventory item names."""
    image_shape: tuple[int, int, int]
    """(H, W, 3) of the RGB observation."""
    vector_labels: tuple[str, ...]
    """Meaning of each entry of the float observation vector."""
    default_episode_length: int
    skill_api: str
    """Documentation of the skill `agent` object for this backend (prompt text)."""
    noop_action: int = 0
    """Action used when a skill ends without yielding, so every step consumes a frame."""
    rules: Callable[[], common_pb2.WorldRules] | None = None
    """The game's rules, generated from the installed game (None where the game's data is not installed)."""
    threats: tuple[str, ...] = ()
    """Creatures and objects that can hurt the player (Describe's threats; PlanInterrupt.threat_within watches
    them through :meth:`BackendEnv.threat_distance`); empty when the backend cannot tell."""
    vector_description: str = "status, inventory and extra values, named in labels"
    """What the vector's entries hold, beyond their names (Describe's vector field description)."""
    display_name: str = ""
    """The game's name as prompts write it (Describe's display_name)."""
    move_actions: tuple[str, ...] = ()
    """The actions that move the player (Describe's action_roles.move)."""
    interact_action: str = ""
    """The action that uses the faced thing: collects, attacks (Describe's action_roles.interact)."""
    stack_limit: int = 0
    """Most of one item the inventory holds where the rules name no maximum (Describe's stack_limit)."""
    vector_scale: float = 0.0
    """What a network divides the observation vector by (Describe's vector field scale; 0: not scaled)."""
    game_task: str = ""
    """The name of the task whose objective is the whole game as its benchmark plays it (ResolveTask spells it out
    with TaskSpec.objective "game"); empty: the backend offers none."""

    @property
    def idle_action(self) -> str:
        """The action that does nothing for a frame (Describe's action_roles.idle)."""
        return self.actions[self.noop_action]


@dataclasses.dataclass
class RawStep:
    """One primitive step of one env, before task logic."""

    image: np.ndarray
    vector: np.ndarray
    native_reward: float
    dead: bool
    """The player died (terminates the episode)."""
    backend_done: bool = False
    """The backend ended the episode for a reason of its own (e.g. MineDojo task done)."""


class BackendEnv(abc.ABC):
    """One environment instance. Not thread-safe; a session serialises access."""

    @abc.abstractmethod
    def reset(self, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """Starts an episode deterministically from ``seed``; returns (image HWC uint8, vector float32)."""

    @abc.abstractmethod
    def step(self, action: int) -> RawStep:
        """Advances one primitive frame."""

    @abc.abstractmethod
    def inventory(self) -> dict[str, int]:
        """Current inventory, item -> count (status values such as health excluded)."""

    @abc.abstractmethod
    def give(self, item: str, count: int) -> None:
        """Puts ``count`` of ``item`` into the inventory (start conditions)."""

    @abc.abstractmethod
    def achievements(self) -> set[str]:
        """Achievements unlocked so far in this episode."""

    @abc.abstractmethod
    def health(self) -> float:
        """Current health."""

    @abc.abstractmethod
    def observe(self) -> tuple[np.ndarray, np.ndarray]:
        """Current (image, vector) without stepping (e.g. after a start inventory was given)."""

    @abc.abstractmethod
    def perception(self) -> dict[str, Any]:
        """What the player perceives now, as JSON-able data for the skill `agent` object."""

    def remembered(self) -> dict[str, Any] | None:
        """The map this episode has shown the player so far, for a skill started now (its `agent` remembers it):
        {"palette": names, "rows": one string per row, a character per cell indexing the palette, " " where never
        seen}; None on a backend that keeps no such map."""
        return None

    @abc.abstractmethod
    def nearby_text(self) -> str:
        """A few words on what is around the player, for trajectory summaries."""

    @abc.abstractmethod
    def death_cause(self) -> str:
        """Best guess of why the player died ("" when alive)."""

    def threat_distance(self, within: int) -> int | None:
        """Cells (the larger axis distance) to the nearest of the spec's threats within ``within``; None when
        there is none that close. Only called on backends whose spec names threats."""
        raise NotImplementedError(f"{type(self).__name__} cannot locate threats")

    def close(self) -> None:  # noqa: B027 - optional hook, most envs hold nothing to free
        """Frees resources."""


class Backend(abc.ABC):
    """A kind of environment: its spec and a factory of envs."""

    spec: BackendSpec

    @abc.abstractmethod
    def make_env(self) -> BackendEnv:
        """Creates one env (reset is called before it is stepped)."""


# name -> "module:Class"; imported lazily so an optional backend's absence is reported, not fatal.
_BACKENDS = {
    "crafter": "services.env_server.backends.crafter:CrafterBackend",
    "minedojo": "services.env_server.backends.minedojo:MineDojoBackend",
}
_loaded: dict[str, Backend] = {}


def backend_names() -> tuple[str, ...]:
    """Every backend this server knows."""
    return tuple(_BACKENDS)


def get_backend(name: str) -> Backend:
    """The backend called ``name`` ("" means crafter).

    Raises InvalidArgument for an unknown name and FailedPrecondition when the backend's own
    package is not installed on this server.
    """
    name = name or "crafter"
    if name not in _BACKENDS:
        raise InvalidArgument(f"unknown backend {shown(name)}; known: {', '.join(_BACKENDS)}")
    if name not in _loaded:
        module_name, class_name = _BACKENDS[name].split(":")
        cls = getattr(importlib.import_module(module_name), class_name)
        try:
            _loaded[name] = cls()
        except ImportError as exc:
            raise FailedPrecondition(
                f"backend {name!r} is not available on this server: {exc}. Install the extra "
                f"(pip install 'rlgpt[{name}]') or use a server image that has it.") from exc
    return _loaded[name]


def backend_spec(name: str) -> tuple[BackendSpec | None, str]:
    """(spec, "") when the backend can run here; (spec or None, reason) when it cannot.

    The spec is a class attribute, so Describe can document a backend this server cannot create.
    """
    name = name or "crafter"
    if name not in _BACKENDS:
        raise InvalidArgument(f"unknown backend {shown(name)}; known: {', '.join(_BACKENDS)}")
    try:
        return get_backend(name).spec, ""
    except FailedPrecondition as exc:
        module_name, class_name = _BACKENDS[name].split(":")
        cls = getattr(importlib.import_module(module_name), class_name)
        return getattr(cls, "spec", None), str(exc)
