"""Converts a GGUF model into a Hugging Face folder that vLLM loads (vLLM has no GGUF loader).

Run with the vLLM venv's interpreter (transformers, accelerate, gguf, torch; never rlgpt's numpy<2 stack):

    .venv-vllm/bin/python deploy/vllm/convert_gguf.py --gguf FILE.gguf --out .cache/vllm-models/gemma3-270m

transformers dequantizes the GGUF weights on load; its GGUF quantizer and ``quantization_config`` are dropped
before saving (``save_pretrained`` refuses a model that still claims to be GGUF-quantized). The tokenizer is
saved with ``add_bos_token=True``: the converted Gemma tokenizer would otherwise encode prompts without <bos>.
Idempotent: a folder whose ``rlgpt-conversion.json`` names the same GGUF (path, size, mtime) is kept; the new
folder is written next to the old one and swapped in, so an interrupted conversion leaves nothing half-written.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

STAMP = "rlgpt-conversion.json"


def source_of(gguf: Path, dtype: str) -> dict[str, object]:
    stat = gguf.stat()
    return {"gguf": str(gguf.resolve()), "size": stat.st_size, "mtime": int(stat.st_mtime), "dtype": dtype}


def up_to_date(out: Path, source: dict[str, object]) -> bool:
    stamp = out / STAMP
    if not stamp.is_file() or not (out / "config.json").is_file():
        return False
    try:
        return json.loads(stamp.read_text()).get("source") == source
    except json.JSONDecodeError:
        return False


def convert(gguf: Path, out: Path, dtype: str) -> tuple[float, Path]:
    """Writes the Hugging Face folder next to ``out``; returns the seconds it took and the folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, add_bos_token=True)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=getattr(torch, dtype))
    # The weights are dequantized already; what is left of the GGUF quantization only blocks save_pretrained.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    return time.perf_counter() - start, staging


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gguf", type=Path, required=True, help="the GGUF file")
    parser.add_argument("--out", type=Path, required=True, help="the Hugging Face folder to write")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32", "float16"),
                        help="dtype of the saved weights")
    args = parser.parse_args(argv)
    if not args.gguf.is_file():
        print(f"error: {args.gguf}: no such GGUF file", file=sys.stderr)
        return 2
    source = source_of(args.gguf, args.dtype)
    if up_to_date(args.out, source):
        print(f"{args.out} is already converted from {args.gguf}")
        return 0
    seconds, staging = convert(args.gguf, args.out, args.dtype)
    (staging / STAMP).write_text(json.dumps({"source": source, "seconds": round(seconds, 1)}, indent=2) + "\n")
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    staging.rename(args.out)
    size = sum(f.stat().st_size for f in args.out.iterdir()) / 2**20
    print(f"converted {args.gguf} -> {args.out} ({size:.0f} MiB, {args.dtype}) in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
