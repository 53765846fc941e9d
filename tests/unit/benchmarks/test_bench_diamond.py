"""bench-diamond's command line and its chain alone, on a real env server."""

from __future__ import annotations

from pathlib import Path

from benchmarks.bench_diamond import main


def test_a_tag_that_cannot_name_files_is_refused_before_anything_runs(tmp_path: Path, invoke) -> None:
    code, output = invoke(main, "--tag", "Night Run/2", "--work", str(tmp_path), "--output", str(tmp_path / "B.md"))
    assert code == 2
    assert "'Night Run/2': use 1 to 32 lowercase letters, digits and '-'" in output and "--tag" in output
    assert not any(tmp_path.iterdir())  # no job, no section


def test_a_tag_names_its_own_raw_results(tmp_path: Path, invoke) -> None:
    # --report-only with nothing saved under the tag's name says where it looked: the tag's own results file.
    code, output = invoke(main, "--tag", "night-2", "--interrupt-damage", "--report-only", "--output",
                          str(tmp_path / "B.md"))
    assert code == 2
    assert "diamond-interrupt-night-2" in output and "run without --report-only first" in output


def test_report_only_with_an_agent_answer_reads_the_answers_own_results(tmp_path: Path, invoke) -> None:
    # An answer whose plan actions hand control back is saved with the interrupt runs; --report-only finds it there.
    answer = tmp_path / "answer.json"
    answer.write_text('{"hand_back_within": 2}')
    code, output = invoke(main, "--agent-answer", str(answer), "--tag", "night-3", "--report-only", "--output",
                          str(tmp_path / "B.md"))
    assert code == 2
    assert "diamond-interrupt-night-3" in output and "run without --report-only first" in output
