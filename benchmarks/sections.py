"""The registry of the benchmark documents: every section of docs/BENCHMARKS.md (``CURRENT``) and of
docs/benchmarks/history.md (``HISTORY``), the committed raw files it is rendered from, and its renderer, which is
the bench's own report code (what its ``--report-only`` writes). ``make bench-report`` (benchmarks/bench_report.py)
writes the documents from this registry alone, and tests/unit/benchmarks/test_sections.py renders them and
compares them with the committed files. A bench whose raw results are not in the repository gets a one-sentence
section saying so; its last numbers are frozen history (docs/benchmarks/frozen.md), not results.

A new bench (or a new run of one, e.g. a ``--tag``) adds a ``Section`` here whose renderer calls the bench's own
report code on its committed raw file: in ``CURRENT`` with its headline row (the run it supersedes moves to
``HISTORY``); then ``make bench-report``. The unit test fails on a committed raw file no section names."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import headlines
from benchmarks.common import REPO_ROOT, load_results
from benchmarks.crafter import diamond_report, diamond_rules_report
from benchmarks.crafter import report as crafter_report
from benchmarks.crafter.diamond_plot import plot_diamond
from benchmarks.env import report as env_report
from benchmarks.game import raw as game_raw
from benchmarks.headlines import Headline
from benchmarks.learner import report as learner_report
from benchmarks.llm import report as llm_report
from benchmarks.replay import report as replay_report
from benchmarks.rlgpt import report as rlgpt_report
from benchmarks.run import report as run_report
from benchmarks.run.plot import plot_runs
from benchmarks.skills import report as skills_report
from benchmarks.validate import report as validate_report

FROZEN = Path("docs/benchmarks/frozen.md")
"""Sections kept as history whose numbers nobody can recompute from this repository, and withdrawn records."""
FIGURES = Path("docs/figures")
SKILL_ANSWERS = Path("benchmarks/skill_answers/claude")


@dataclass(frozen=True)
class Figures:
    """Where a section's figures go: drawn into ``REPO_ROOT / FIGURES`` or not drawn at all (the links alone),
    linked with ``prefix`` (relative to the document the section is in)."""

    draw: bool
    prefix: str = "figures/"

    def link(self, name: str) -> str:
        return f"{self.prefix}{name}"


@dataclass(frozen=True)
class Section:
    """One section: its key, the committed raw files it is rendered from (none: a note with no numbers), its
    renderer and, for a current section with raw data, its row of the headline table."""

    key: str
    raw: tuple[Path, ...]
    render: Callable[[Figures], str]
    headline: Callable[[], Headline | list[Headline]] | None = None
    """Its row of the headline table (rows, for a section two benchmarks write)."""


def load(raw: Path) -> dict[str, Any]:
    return load_results(REPO_ROOT / raw)


def bench_raw(name: str) -> Path:
    return Path("docs/bench-raw") / name / "results.json"


def figure_path(name: str) -> Path:
    return REPO_ROOT / FIGURES / name


# --- the sections, each from its bench's report code -------------------------------------------------------
def plain(key: str, raw: Path, render: Callable[[dict[str, Any]], str],
          headline: Callable[[dict[str, Any], Path], Headline] | None = None) -> Section:
    """A section with no figure, rendered from one raw file."""
    return Section(key, (raw,), lambda _: render(load(raw)),
                   (lambda: headline(load(raw), raw)) if headline else None)


def retitled(key: str, raw: Path, render: Callable[[dict[str, Any]], str], title: str) -> Section:
    """A section of a run apart from the bench's current one (another setting), under a title of its own."""
    return Section(key, (raw,), lambda _: title + "\n" + render(load(raw)).split("\n", 1)[1])


def rlgpt(raw: Path) -> Section:
    def render(figures: Figures) -> str:
        if figures.draw:
            return rlgpt_report.render_section(load(raw), figure_path(rlgpt_report.FIGURE))
        with tempfile.TemporaryDirectory() as scratch:  # its renderer draws where it links: drawn and dropped
            return rlgpt_report.render_section(load(raw), Path(scratch) / rlgpt_report.FIGURE)
    return Section("rlgpt", (raw,), render, lambda: headlines.rlgpt(load(raw), raw))


def diamond(name: str, current: bool = False) -> Section:
    """A bench-diamond run (docs/bench-raw/<name>), its figure named as bench_diamond names it."""
    raw = bench_raw(name)
    figure = name.replace("diamond", "diamond_kept_plan", 1).replace("-", "_") + ".png"

    def render(figures: Figures) -> str:
        results = load(raw)
        if figures.draw:
            plot_diamond(results, figure_path(figure))
        return diamond_report.render_section(results, figures.link(figure), diamond_report.section_title(results))
    return Section(name, (raw,), render, (lambda: headlines.diamond(load(raw), raw)) if current else None)


def diamond_rules(name: str, current: bool = False) -> Section:
    """A bench-diamond-rules run (docs/bench-raw/<name>)."""
    raw = bench_raw(name)
    figure = name.replace("-", "_") + ".png"

    def render(figures: Figures) -> str:
        results = load(raw)
        if figures.draw:
            diamond_rules_report.plot_rules(results, figure_path(figure))
        title = diamond_rules_report.section_title(results)
        return diamond_rules_report.render_section(results, figures.link(figure), title)
    return Section(name, (raw,), render, (lambda: headlines.diamond_rules(load(raw), raw)) if current else None)


def make_run(raw: Path) -> Section:
    figure = run_report.FIGURE.name

    def render(figures: Figures) -> str:
        results = load(raw)
        if figures.draw:
            plot_runs(results, figure_path(figure))
        return run_report.render_section(results, figures.link(figure), run_report.section_title(results))
    return Section("run", (raw,), render, lambda: headlines.run(load(raw), raw))


def skills(answers: Path) -> Section:
    return Section("skills", (answers / skills_report.META,),
                   lambda _: skills_report.render_section(REPO_ROOT / answers, shown=answers),
                   lambda: headlines.skills_row(REPO_ROOT / answers, answers))


def crafter(raw: Path) -> Section:
    """The Crafter section from bench-crafter's raw results where they are committed and every bench-game scoring
    (docs/bench-raw/game/*/results.json), each recomputed from its episodes (their own report code)."""
    figure = "crafter_achievements.png"
    games = tuple(sorted(p.relative_to(REPO_ROOT) for p in (REPO_ROOT / game_raw.ROOT).glob(f"*/{game_raw.RESULTS}")))

    def render(figures: Figures) -> str:
        results = load(raw) if (REPO_ROOT / raw).exists() else None
        docs = game_raw.load_all(REPO_ROOT / game_raw.ROOT)
        drawn = (crafter_report.plot_achievements(results, docs, figure_path(figure)) if figures.draw
                 else (results or docs) and figure)
        return crafter_report.crafter_section(results, docs, figures.link(figure) if drawn else None)

    def row() -> list[Headline]:  # bench-crafter's and bench-game's, each where its raw data is committed
        docs = game_raw.load_all(REPO_ROOT / game_raw.ROOT)
        rows = [headlines.crafter(load(raw), raw)] if (REPO_ROOT / raw).exists() else []
        rows += [headlines.game(docs, games)] if docs else []
        return rows or [missing("make bench-crafter")]
    return Section("crafter", (raw, *games), render, row)


def llm(raw: Path) -> Section:
    """bench-llm's section from its raw results where they are committed (its own report code)."""
    return optional("llm", raw, llm_report.TITLE, "make bench-llm", lambda results, _: llm_report.render(results),
                    headlines.llm)


def no_raw(title: str, command: str, raw: Path | None) -> str:
    """The section of a bench whose raw results are not in the repository: one sentence, no numbers."""
    saved = (f"`{command}` measures again and saves `{raw}`, from which this section is then rendered" if raw else
             f"`{command}` prints its timings and saves no raw file, so this section shows none")
    return (f"{title}\n\nNo raw data in the repository: the last numbers cannot be recomputed, so they are kept as "
            f"frozen history in `{FROZEN}`, not as results; {saved}.\n")


def note(key: str, text: str, headline: Headline) -> Section:
    """A section with no numbers and no raw file: a bench that saves none, or a record withdrawn."""
    return Section(key, (), lambda _: text, lambda: headline)


def missing(bench: str) -> Headline:
    """The headline of a bench whose raw results are not in the repository."""
    return Headline(bench, f"none: its raw data is not in the repository (its last numbers are frozen history in "
                           f"`{FROZEN}`)")


def optional(key: str, raw: Path, title: str, bench: str, render: Callable[[dict[str, Any], Figures], str],
             headline: Callable[[dict[str, Any], Path], Headline]) -> Section:
    """A bench whose raw results may be missing: its own section and headline from them where they are committed,
    the one-sentence note and a headline that says so where they are not."""
    def rendered(figures: Figures) -> str:
        return render(load(raw), figures) if (REPO_ROOT / raw).exists() else no_raw(title, bench, raw)

    def row() -> Headline:
        return headline(load(raw), raw) if (REPO_ROOT / raw).exists() else missing(bench)
    return Section(key, (raw,), rendered, row)


ABLATION_TITLE = "## Agent ablation with a capable model through the relay (make bench-rlgpt): withdrawn"
ABLATION_WITHDRAWN = (
    "Withdrawn on 2026-11-28. The 2026-11-23 record (Claude through `rlgpt serve llm-relay`, rl-gpt with the `one`, "
    "`slow-fast` and `slow-fast-critic` setups on make_wood_pickaxe and collect_stone: 100% in all six, a tie) was "
    "answered by one model instance across all its requests, and its six runs shared one skill library in "
    "sequence, so it measured library reuse and the model's memory of earlier requests, not agent structure. Its "
    "records in `docs/runs/claude-relay-ablation-*` show it: every coded skill of the six runs is one of the same "
    "three programs, and the first call of `claude-relay-ablation-collect_stone-one` returns, byte for byte, the "
    "1,232-character place_table_make_wood_pickaxe program its prompt named without showing its code. A re-record "
    "would run `make bench-rlgpt BENCH_RLGPT_ARGS=\"--modes rl-gpt --agents S --tasks T --results R --title ...\"` "
    "once per setup S and task T, on tasks that separate the setups (collect_iron, collect_diamond), so that each "
    "run starts from an empty skill library, with RLGPT_LLM_BASE_URL pointed at `rlgpt serve llm-relay` and every "
    "request file answered by a fresh model instance that sees that file and nothing else. Until then "
    f"the bench has no capable-model ablation; the withdrawn section is kept in `{FROZEN}`.")

IMAGES_TITLE = "## Container images with podman (make images-local, make smoke-images, make play-kube)"

CURRENT: tuple[Section, ...] = (
    plain("env", bench_raw("env"), env_report.render_section, headlines.env),
    plain("learner", bench_raw("learner"), learner_report.render_section, headlines.learner),
    llm(bench_raw("llm")),
    rlgpt(Path("docs/results/bench-rlgpt.json")),
    note("ablation-withdrawn", f"{ABLATION_TITLE}\n\n{ABLATION_WITHDRAWN}\n",
         Headline("make bench-rlgpt", "agent ablation with a capable model: withdrawn on 2026-11-28 (one model "
                  "instance answered every request and the runs shared one skill library: not independent "
                  "records); not re-recorded yet")),
    plain("replay", replay_report.RAW, replay_report.render_section, headlines.replay),
    note("images", no_raw(IMAGES_TITLE, "make smoke-images", None), missing("make smoke-images")),
    skills(SKILL_ANSWERS),
    crafter(bench_raw("crafter")),
    plain("validate", bench_raw("validate"), validate_report.render_section, headlines.validate),
    diamond("diamond-interrupt-revised-updates-1m", current=True),
    diamond_rules("diamond-rules-revised", current=True),
    make_run(run_report.RAW),
)
"""docs/BENCHMARKS.md after its headline table: one section per bench, its current run."""

HISTORY: tuple[Section, ...] = (
    retitled("learner-envs-16", Path("docs/bench-raw/learner/envs-16.json"), learner_report.render_section,
             "## Learner training throughput with 16 envs per rollout worker (make bench-learner "
             "--envs-per-worker 16)"),
    diamond("diamond-prior"),
    diamond("diamond-interrupt"),
    diamond("diamond-interrupt-threat-seen"),
    diamond_rules("diamond-rules"),
    diamond("diamond-interrupt-revised"),
    diamond("diamond-interrupt-revised-no-fight"),
    diamond("diamond-interrupt-revised-updates"),
)
"""docs/benchmarks/history.md: runs a later run of the same bench superseded, in the order they were measured."""
