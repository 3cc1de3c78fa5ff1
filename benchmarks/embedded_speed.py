"""Benchmark: the embedded backend against the floor this machine's own matrix throughput sets.

1. Matrix products: torch's throughput here for the model's largest linear layer (hidden x
   intermediate) at 256 rows (prefill-sized), 16 (branch-sized) and 1 (decoding), in float32 and in
   each lower precision torch offers (bfloat16, dynamic int8).
2. For each `--runtime` (a precision of the embedded backend), in a fresh process: start-up time,
   RSS after loading and at the end, then fixed requests through openjev's engine (prompt layer,
   warm-up, batched branches; no HTTP): the README example (examples/request.json), a ~400-token
   state with 10 questions and a ~2,000-token state with 3. For each: prefill tokens/s, the warm-up
   and branch phases and end-to-end latency, each beside its floor:

       floor = FLOPs / (measured float32 FLOP/s at 256 rows)
       FLOPs = sum over the forward passes of 2 * N_linear * tokens + 4 * layers * d_attn * sum(context)
               + 2 * vocab * hidden per read position

   (N_linear: the decoder's linear-layer weights; d_attn: heads x head size; context: the keys each
   token attends to). A ratio under 1 means faster than float32 could ever be here. Then greedy
   decoding speed (the thinking tier) in tokens/s.
3. Agreement (`--agreement N [--mmlu M]`): N fixed jev-dev states and N (or M) MMLU questions answered by each runtime;
   label probabilities compared with float32's: mean |dp| and argmax agreement.

    uv run python benchmarks/embedded_speed.py [--model packaged:qwen2.5-coder-1.5b]
        [--runtime auto --runtime float32 ...] [--quick] [--agreement 20]

To see a CPU without AMX/AVX512 on one that has them, limit every kernel library to AVX2:
`ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2
FBGEMM_ENABLE_INSTRUCTIONS=AVX2` (the script prints torch's capability and oneDNN's ISA).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gzip
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
README_EXAMPLE = ROOT / "examples" / "request.json"
JEV_DEV = ROOT / "evals" / "data" / "jev-dev" / "jev-dev.jsonl"
MMLU = ROOT / "evals" / "data" / "mmlu" / "mmlu.jsonl.gz"
ROWS = (256, 16, 1)


def best_seconds(work: Any, repeats: int) -> float:
    work()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best


def matmul_throughput(hidden: int, intermediate: int, repeats: int) -> dict[str, dict[int, float]]:
    """GFLOP/s of x[rows, hidden] @ W[hidden, intermediate] per precision and row count."""
    import torch
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    linear = torch.nn.Linear(hidden, intermediate, bias=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        int8 = quantize_dynamic(torch.nn.Sequential(linear), {torch.nn.Linear: per_channel_dynamic_qconfig})
    bf16 = torch.nn.Linear(hidden, intermediate, bias=False).to(torch.bfloat16)
    layers = {"float32": (linear, torch.float32), "bfloat16": (bf16, torch.bfloat16), "int8": (int8, torch.float32)}
    result: dict[str, dict[int, float]] = {}
    with torch.inference_mode():
        for name, (layer, dtype) in layers.items():
            result[name] = {}
            for rows in ROWS:
                x = torch.randn(rows, hidden, dtype=dtype)
                seconds = best_seconds(lambda layer=layer, x=x: layer(x), repeats)
                result[name][rows] = 2 * rows * hidden * intermediate / seconds / 1e9
    return result


def isa_report() -> str:
    """The instruction sets the kernels run with: torch's capability, MKL's (float32 matmuls), oneDNN's
    (bf16 matmuls, when torch hands them to it) and fbgemm's limit (int8; it has no verbose mode)."""
    probe = (
        "import torch; torch.set_num_threads(1); a = torch.randn(64, 64); a @ a; "
        "torch.nn.functional.linear(a.bfloat16(), a.bfloat16()); "
        "print('torch capability', torch.backends.cpu.get_cpu_capability(), '| oneDNN bf16:', "
        "torch.ops.mkldnn._is_mkldnn_bf16_supported())"
    )
    env = {**os.environ, "ONEDNN_VERBOSE": "1", "MKL_VERBOSE": "1"}
    lines = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env).stdout.splitlines()
    mkl = next((line.split(" for ", 1)[-1].split(",")[0] for line in lines if "MKL_VERBOSE oneMKL" in line), "?")
    onednn = next((line.split("isa:", 1)[1] for line in lines if ",isa:" in line), "not used")
    torch_line = next((line for line in lines if line.startswith("torch capability")), "torch capability ?")
    fbgemm = os.environ.get("FBGEMM_ENABLE_INSTRUCTIONS", "what the CPU has")
    return f"{torch_line} | MKL: {mkl} | oneDNN: {onednn} | fbgemm: {fbgemm}"


# ---- requests ------------------------------------------------------------------------------------


def support_state(engine: Any, marker: str, target_tokens: int) -> list[dict[str, str]]:
    """A support conversation whose shared prefix is about `target_tokens` tokens, unique per `marker`."""
    from openjev.request.schema import SystemOneRequest

    probe = {"q": {"type": "noul", "instructions": "Is this a complaint?"}}
    turns = [{"role": "system", "content": f"Support chat {marker}."}]
    while True:
        request = SystemOneRequest.model_validate({"model": "jev-latest", "state": turns, "questions": probe})
        if len(engine.prepare(request).shared_prefix_ids) >= target_tokens:
            return turns
        n = len(turns) // 2
        turns += [
            {"role": "user", "content": f"Hi, this is {marker}. Order #{4711 + n} (a blender) arrived with a "
             f"cracked jar. Tracking number ZX{9000 + n} says it was dropped twice. I want my money back."},
            {"role": "assistant", "content": f"I am sorry about order #{4711 + n}. I have opened a damage claim "
             "and will ship a replacement blender today."},
        ]  # fmt: skip


QUESTION_BANK = [
    {"type": "noul", "instructions": "Does the customer ask for a refund?"},
    {"type": "noul", "instructions": "Was the agent rude at any point?"},
    {"type": "choice", "instructions": "What is the main topic?",
     "criteria": {"damage": "A damaged delivery", "login": "A login problem", "pricing": "Pricing"}},
    {"type": "score", "instructions": "How frustrated is the customer?", "criteria": ["Calm", "Annoyed", "Furious"]},
    {"type": "noul", "instructions": "Is a tracking number mentioned?"},
    {"type": "choice", "instructions": "Which item is concerned?",
     "criteria": {"blender": "A blender", "laptop": "A laptop", "sofa": "A sofa", "phone": "A phone"}},
    {"type": "noul", "instructions": "Did the agent promise a replacement?"},
    {"type": "score", "instructions": "How urgent is it?", "criteria": ["Routine", "Urgent", "Emergency"]},
    {"type": "noul", "instructions": "Is the customer a business?"},
    {"type": "choice", "instructions": "Which team should handle it?",
     "criteria": {"billing": "Charges and refunds", "shipping": "Deliveries", "tech": "Software bugs"}},
]  # fmt: skip


def fixed_requests(engine: Any, quick: bool) -> dict[str, dict[str, Any]]:
    requests = {"README example": json.loads(README_EXAMPLE.read_text())}
    if not quick:
        for name, tokens, count in (("400-token state, 10 questions", 400, 10), ("2000-token state, 3", 2000, 3)):
            questions = {f"q{i}": QUESTION_BANK[i] for i in range(count)}
            state = support_state(engine, f"{tokens}-{count}", tokens)
            requests[name] = {"model": "jev-latest", "state": state, "questions": questions}
    return requests


def agreement_requests(count: int, mmlu: int) -> list[dict[str, Any]]:
    """The first `count` jev-dev states and `mmlu` MMLU questions spread over the file (fixed: the files
    are checked in)."""
    requests = []
    for line in JEV_DEV.read_text().splitlines()[:count]:
        record = json.loads(line)
        requests.append({"model": "jev-latest", "state": record["state"], "questions": record["questions"]})
    with gzip.open(MMLU, "rt") as lines:
        rows = [json.loads(line) for line in lines if '"correct_answer": "answer"' not in line]
    step = max(1, len(rows) // max(1, mmlu))
    for row in rows[::step][:mmlu]:
        criteria = {letter: row[f"answer_{letter.lower()}"] for letter in "ABCD"}
        question = {"type": "choice", "instructions": "Answer the question.", "criteria": criteria}
        requests.append({"model": "jev-latest", "state": row["question"], "questions": {"answer": question}})
    return requests


# ---- one runtime, in its own process ---------------------------------------------------------------


class Flops:
    """FLOPs of the model's forward passes (see the module doc), from its config."""

    def __init__(self, config: dict[str, Any]) -> None:
        hidden, layers = config["hidden_size"], config["num_hidden_layers"]
        heads = config["num_attention_heads"]
        head_dim = config.get("head_dim") or hidden // heads
        kv = config.get("num_key_value_heads", heads) * head_dim
        per_layer = hidden * heads * head_dim * 2 + hidden * kv * 2 + 3 * hidden * config["intermediate_size"]
        self.linear, self.layers, self.attn = layers * per_layer, layers, heads * head_dim
        self.head = config["vocab_size"] * hidden
        self.hidden, self.intermediate = hidden, config["intermediate_size"]

    def forward(self, tokens: int, context: int, reads: int = 1) -> float:
        """`tokens` new tokens after `context` cached ones, the head at `reads` positions."""
        attended = tokens * context + tokens * (tokens + 1) // 2
        return 2 * self.linear * tokens + 4 * self.layers * self.attn * attended + 2 * self.head * reads


def rss_mb() -> tuple[float, float]:
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


def label_probabilities(answers: dict[str, Any]) -> dict[str, list[float]]:
    out = {}
    for key, answer in answers.items():
        if answer["type"] == "noul":
            out[key] = [answer["noul"], 1 - answer["noul"]]
        elif "probabilities" in answer:
            out[key] = list(answer["probabilities"].values())
    return out


async def run_one(args: argparse.Namespace) -> dict[str, Any]:
    from openjev.backends.base import GenerationCall
    from openjev.backends.embedded import EmbeddedBackend, LlamaCppBackend
    from openjev.backends.embedded.precision import resolve_precision
    from openjev.config import Settings
    from openjev.engine import Engine
    from openjev.prompting.tokenizer import ChatTokenizer
    from openjev.request.schema import SystemOneRequest

    started = time.perf_counter()
    precision = resolve_precision(args.one, args.model)
    make = LlamaCppBackend if precision == "gguf" else functools.partial(EmbeddedBackend, dtype=precision)
    backend: Any = make(args.model, cache_dir=args.cache_dir)
    await backend.start()
    report: dict[str, Any] = {"runtime": backend.dtype, "threads": backend.threads}
    report["start_seconds"], report["rss_after_load_mb"] = time.perf_counter() - started, rss_mb()[0]
    assert backend.tokenizer_dir is not None
    config = json.loads((backend.tokenizer_dir / "config.json").read_text())
    flops = Flops(config)
    report["shape"] = [config["hidden_size"], config["intermediate_size"]]
    engine = Engine(Settings(request_timeout=24 * 3600), ChatTokenizer(backend.tokenizer_dir), backend)

    async def ask(body: dict[str, Any]) -> tuple[Any, Any, float]:
        begun = time.perf_counter()
        prepared = engine.prepare(SystemOneRequest.model_validate(body))
        evaluation = await engine.evaluate(prepared)
        return prepared, evaluation, time.perf_counter() - begun

    await ask(json.loads(README_EXAMPLE.read_text()))  # first-call kernel set-up belongs to no figure
    report["requests"] = {}
    for name, body in fixed_requests(engine, args.quick).items():
        runs = []
        for repeat in range(args.repeats):
            # A new system message each run: nothing of the request is cached.
            fresh = {**body, "state": [{"role": "system", "content": f"Run {repeat}."}, *as_turns(body["state"])]}
            runs.append(await ask(fresh))
        prepared, evaluation, seconds = min(runs, key=lambda run: run[2])
        prefix = len(prepared.shared_prefix_ids)
        suffixes = [len(branch.suffix_ids) for branch in prepared.branches]
        warm_flops = flops.forward(prefix, 0)
        branch_flops = sum(flops.forward(length, prefix) for length in suffixes)
        progress(f"{backend.dtype}: {name}: {seconds:.1f} s")
        report["requests"][name] = {
            "prefix_tokens": prefix, "suffix_tokens": sum(suffixes), "questions": len(suffixes),
            "prefill_seconds": evaluation.prefill_seconds, "branches_seconds": evaluation.branches_seconds,
            "end_to_end_seconds": seconds, "prefill_flops": warm_flops, "branch_flops": branch_flops,
        }  # fmt: skip
    ids = list(prepared.shared_prefix_ids)
    begun = time.perf_counter()
    generation = await backend.generate(GenerationCall("gen", ids, args.decode, stop_token_ids=()))
    report["decode_tokens_per_second"] = len(generation.output_ids) / (time.perf_counter() - begun)
    report["agreement"] = []
    bodies = agreement_requests(args.agreement, args.agreement if args.mmlu is None else args.mmlu)
    for index, body in enumerate(bodies):
        report["agreement"].append(label_probabilities((await ask(body))[1].answers))
        progress(f"{backend.dtype}: agreement request {index + 1}/{len(bodies)}")
    report["rss_end_mb"], report["rss_peak_mb"] = rss_mb()
    await backend.aclose()
    return report


def progress(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line} (load average {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)


def as_turns(state: Any) -> list[dict[str, str]]:
    return [{"role": "user", "content": state}] if isinstance(state, str) else list(state)


# ---- the report ------------------------------------------------------------------------------------


def print_runtime(report: dict[str, Any], fp32_gflops: float, reference: dict[str, Any] | None) -> None:
    print(f"\n== runtime {report['runtime']} ({report['threads']} threads)")
    print(f"start-up {report['start_seconds']:.1f} s; RSS after load {report['rss_after_load_mb']:.0f} MB, "
          f"end {report['rss_end_mb']:.0f} MB, peak {report['rss_peak_mb']:.0f} MB")  # fmt: skip
    for name, r in report["requests"].items():
        floor_pre = r["prefill_flops"] / fp32_gflops / 1e9
        floor_br = r["branch_flops"] / fp32_gflops / 1e9
        floor = floor_pre + floor_br
        print(
            f"{name}: {r['prefix_tokens']} prefix + {r['suffix_tokens']} branch tokens ({r['questions']} questions)\n"
            f"   prefill  {r['prefill_seconds']:6.2f} s ({r['prefix_tokens'] / r['prefill_seconds']:6.0f} tok/s)"
            f"  floor {floor_pre:6.2f} s  ratio {r['prefill_seconds'] / floor_pre:5.2f}\n"
            f"   branches {r['branches_seconds']:6.2f} s                 floor {floor_br:6.2f} s"
            f"  ratio {r['branches_seconds'] / floor_br:5.2f}\n"
            f"   end to end {r['end_to_end_seconds']:6.2f} s               floor {floor:6.2f} s"
            f"  ratio {r['end_to_end_seconds'] / floor:5.2f}"
        )
    print(f"decoding (greedy, thinking tier): {report['decode_tokens_per_second']:.1f} tokens/s")
    if reference is not None and report["agreement"]:
        deltas, agree, total = [], 0, 0
        for mine, theirs in zip(report["agreement"], reference["agreement"], strict=True):
            for key, probabilities in mine.items():
                other = theirs[key]
                deltas += [abs(a - b) for a, b in zip(probabilities, other, strict=True)]
                agree += probabilities.index(max(probabilities)) == other.index(max(other))
                total += 1
        print(f"agreement with float32 over {total} questions: mean |dp| {sum(deltas) / len(deltas):.4f}, "
              f"max |dp| {max(deltas):.4f}, argmax agreement {agree / total:.1%}")  # fmt: skip


def main(args: argparse.Namespace) -> None:
    import torch

    from openjev.backends.embedded.precision import physical_cores

    torch.set_num_threads(physical_cores())
    print(isa_report())
    runtimes = args.runtime or ["auto", "float32"]
    reports = {}
    for runtime in runtimes:
        command = [sys.executable, __file__, "--one", runtime, "--model", args.model, "--repeats", str(args.repeats),
                   "--agreement", str(args.agreement), "--decode", str(args.decode)]  # fmt: skip
        command += ["--mmlu", str(args.mmlu)] if args.mmlu is not None else []
        command += ["--quick"] if args.quick else []
        command += ["--cache-dir", str(args.cache_dir)] if args.cache_dir else []
        # Its progress goes to stderr, passed through; its report is the last line of stdout.
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True)
        if done.returncode != 0:
            print(f"\n== runtime {runtime} failed (exit {done.returncode})")
            continue
        reports[runtime] = json.loads(done.stdout.strip().splitlines()[-1])
    hidden, intermediate = next(iter(reports.values()))["shape"] if reports else (1536, 8960)
    throughput = matmul_throughput(hidden, intermediate, 3 if args.quick else 8)
    print(f"\n== matrix products, [rows x {hidden}] @ [{hidden} x {intermediate}], GFLOP/s "
          f"({physical_cores()} threads)")  # fmt: skip
    for name, by_rows in throughput.items():
        print(f"{name:>9}: " + "  ".join(f"{rows:>3} rows {gflops:7.1f}" for rows, gflops in by_rows.items()))
    fp32 = throughput["float32"][256]
    reference = next((r for r in reports.values() if r["runtime"] == "float32"), None)
    for report in reports.values():
        print_runtime(report, fp32, reference if report is not reference else None)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="packaged:qwen2.5-coder-1.5b", help="packaged:<key>, a dir or a .gguf")
    parser.add_argument("--runtime", action="append", help="auto, float32, bfloat16, int8 (repeatable)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="converted-model cache (default: user cache)")
    parser.add_argument("--quick", action="store_true", help="README example only, fewer repeats")
    parser.add_argument("--repeats", type=int, default=2, help="runs per request (the best is kept)")
    parser.add_argument("--agreement", type=int, default=0, help="jev-dev states and MMLU questions to compare")
    parser.add_argument("--mmlu", type=int, default=None, help="MMLU questions to compare (default: --agreement)")
    parser.add_argument("--decode", type=int, default=16, help="tokens to decode for the decoding speed")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    cli = parser.parse_args()
    if cli.one:
        print(json.dumps(asyncio.run(run_one(cli))))
    else:
        main(cli)
