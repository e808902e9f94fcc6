#!/bin/bash
# GSM8K study as a Slurm array: one `kvparity eval gsm8k` process per shard, then one merge.
#
#   sbatch --array=0-15 deploy/gsm8k-slurm.sh          # the shards (0-based, like --shard i/n)
#   sbatch --dependency=afterok:<array job id> --export=ALL,MERGE=1 deploy/gsm8k-slurm.sh
#
# Each shard writes its own directory and can simply be resubmitted after a preemption or a
# failure: finished items are skipped. Edit the settings below; every shard and the merge must
# use the same ones (merge refuses shards whose manifests differ).
#SBATCH --job-name=kvparity-gsm8k
#SBATCH --cpus-per-task=8
#SBATCH --mem=16G
#SBATCH --time=24:00:00
#SBATCH --requeue
#SBATCH --output=kvparity-gsm8k-%A_%a.log
set -euo pipefail

KVPARITY=${KVPARITY:-kvparity}
STUDY=${STUDY:-$PWD/study}
SHARDS=${SHARDS:-16}   # must equal the size of --array
DATA=${DATA:-/data/gsm8k/test.jsonl}
MODELS=(${MODELS:-/models/m1 /models/m2})

if [[ "${MERGE:-0}" == 1 ]]; then
  exec "$KVPARITY" merge "$STUDY"/shard-*-of-"$SHARDS" --out "$STUDY/merged"
fi

i=${SLURM_ARRAY_TASK_ID:?run as an array job: sbatch --array=0-$((SHARDS - 1))}
model_args=()
for m in "${MODELS[@]}"; do model_args+=(--model "$m"); done
exec "$KVPARITY" eval gsm8k --data "$DATA" "${model_args[@]}" \
  --conditions greedy,temperature:0.7,top-p:0.9 --dtypes fp16,bf16,fp32 --kernels standard,invariant \
  --shots 5 --max-new-tokens 256 --seed 1 --threads "${SLURM_CPUS_PER_TASK:-1}" \
  --shard "$i/$SHARDS" --no-report --out "$STUDY/shard-$i-of-$SHARDS"
