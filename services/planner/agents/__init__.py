"""The planner's agents, one module each (as Voyager's ``agents/``): :mod:`.slow` (a task -> a plan), :mod:`.fast`
(a sub-task -> skill code or an RL config), :mod:`.one` (both in one answer, the agent ablation) and
:mod:`.kept_plan` (the fast agent's config for RL around a kept plan). Each makes its LLM call; what is done with an
answer (tested, kept, registered, converted) is :mod:`.answers`', whoever wrote it; the prompt texts they share are
:mod:`.texts`, and the prompts themselves text files under ``services/planner/prompts/``."""
