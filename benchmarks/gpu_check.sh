#!/usr/bin/env bash
# Issue 25's GPU measurements, and the engines' tests on CUDA, in one call of the device tool, in
# about 6 minutes of the 15 a session is lent (see docs/benchmarks/throughput.md, "On a GPU").
#
# Here first: `bash benchmarks/gpu_pack.sh` (spaCy and gensim for the machine, .gpu/). Then the
# device tool's run, with carry [".gpu"], timeout_s 480 and the command
#     bash benchmarks/gpu_check.sh
# Each step prints to the reply and to $OUT/gpu_check.log, and has a time limit of its own, so
# one that hangs leaves the others their time. `--smoke` runs the same steps on a few lines of
# the text, on whatever device there is: a check of this script on a machine without a GPU.
set -uo pipefail
log_folder="${OUT:-/tmp}"
mkdir -p "$log_folder"
log="$(cd "$log_folder" && pwd)/gpu_check.log"
cd "$(dirname "$0")"

scratch=$(mktemp -d)  # the packages and the smoke corpus, gone at the end
trap 'rm -rf "$scratch"' EXIT
site="$scratch/site"
mkdir "$site"
# The packed site is for the device machine's Python; a Python that has spaCy and gensim (the
# project's virtual environment, for --smoke) uses its own.
if ! python3 -c "import spacy, gensim" 2>/dev/null && ! tar -xJf ../.gpu/site.tar.xz -C "$site" 2>/dev/null; then
    echo "gpu_check.sh: no readable .gpu/site.tar.xz; run benchmarks/gpu_pack.sh first" >&2
    exit 1
fi
export PYTHONPATH="$site:$(cd .. && pwd)" PYTHONUNBUFFERED=1
# The command the CLI tests start, as the package's entry point would install it.
mkdir "$scratch/bin"
printf '#!/bin/sh\nexec python3 -m roberta_static "$@"\n' >"$scratch/bin/roberta-static"
chmod +x "$scratch/bin/roberta-static"
export PATH="$scratch/bin:$PATH"
: >"$log"
# Bytecode now, once, as pip writes it at install: a module imported without it is compiled at
# each import, and those calls would mix with the ones encoder_phases.py counts in the forward.
# The image's torch and transformers too, where it lets us write (an H100 profile once counted
# 4,070 calls to compile, 8.5 s, in transformers 5's forward: imports, or a per-call cost?).
libraries=$(python3 -c "import os, torch, transformers as t
print(os.path.dirname(torch.__file__), os.path.dirname(t.__file__))")
python3 -m compileall -q -j 0 "$site" ../roberta_static ../cli ../spacy_plugin . >/dev/null
began=$SECONDS
python3 -m compileall -q -j 0 $libraries >/dev/null 2>&1 || true
echo "bytecode for the image's torch and transformers: $((SECONDS - began)) s" \
    "(about 0 where it was there)" | tee -a "$log"

if [ "${1:-}" = "--smoke" ]; then
    small="$scratch/corpus.txt"
    python3 -c "from throughput import corpus_lines; print('\n'.join(corpus_lines(None)[:60]))" >"$small"
    text=(--corpus "$small" --copies 1)
    phases_text=(--lines 60)
    peak=()
    tests_limit=600  # one process on a few cores, not eight on the GPU machine's sixteen
else
    text=(--copies 16)  # about 7.6 M model tokens: long enough that start-up is a small share
    phases_text=(--repeat 4)
    peak=(--peak-tflops 989)  # dense bfloat16, H100 SXM and H200 alike (their data sheets)
    tests_limit=120
fi

step() {  # step SECONDS SCRIPT ARGS...: one benchmark, limited to SECONDS
    local limit=$1
    shift
    echo "== $(date +%T) python3 $* (limit ${limit} s)" | tee -a "$log"
    # Ctrl-C's signal, so a step past its limit still removes its temporary folder.
    timeout --signal=INT --kill-after=15 "$limit" python3 "$@" 2>&1 | tee -a "$log"
    local status=${PIPESTATUS[0]}
    [ "$status" -eq 0 ] || echo "== exit status $status" | tee -a "$log"
}

tests=()
for name in engine workers encoder batching precision merge; do tests+=("../tests/test_$name.py"); done

{
    nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv 2>&1 || true
    python3 -c "import torch, transformers, spacy, gensim; print('torch', torch.__version__, \
'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'spacy', \
spacy.__version__, 'gensim', gensim.__version__, 'cores', __import__('os').cpu_count())"
} 2>&1 | tee -a "$log"

# The issue's target: end to end >= 1 M model tokens/s with --workers auto, (a)/(c) >= 0.8,
# model FLOP use, and the run-to-run cosine.
step 170 throughput.py --random-roberta-base "${text[@]}" --tolerance --baseline-words 2 "${peak[@]}"
# The same with one process, for what the workers add.
step 110 throughput.py --random-roberta-base "${text[@]}" --workers 1 --baseline-words 1
# Where the encoder thread's time goes, on the device too; the calls to compile, by caller.
step 60 encoder_phases.py --random-roberta-base --dtype bfloat16 "${phases_text[@]}" --workers auto
# The engines' tests where the default device is CUDA: one process, workers, batching, precision
# and merge against the same runs on the GPU (the suite proper runs on CPU-only CI machines).
parallel=()
if python3 -c "import xdist" 2>/dev/null; then parallel=(-n 8); fi
step "$tests_limit" -m pytest -q -p no:cacheprovider "${parallel[@]}" "${tests[@]}"
echo "== $(date +%T) done" | tee -a "$log"
