"""The headline table's cells: a model is named whole."""

from __future__ import annotations

from benchmarks.headlines import who


def test_a_models_short_name_keeps_its_parentheses_whole() -> None:
    """The bench-game headline named 'embedded Gemma 3 270m (gemma-3-270m-q4_k_m.gguf': cut inside them."""
    assert who("embedded Gemma 3 270m (gemma-3-270m-q4_k_m.gguf, llama.cpp server)") == \
        "embedded Gemma 3 270m (gemma-3-270m-q4_k_m.gguf, llama.cpp server)"
    assert who("Claude (Anthropic), as helper agents answering the relay's request files") == "Claude (Anthropic)"
