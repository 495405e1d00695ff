#!/usr/bin/env bash
# Train on a slurm cluster: one task per GPU, started by srun.
#
# Usage: bash tools/slurm_train.sh PARTITION JOB_NAME CONFIG WORK_DIR \
#            [train.py arguments]
# Environment: GPUS (8), GPUS_PER_NODE (8), CPUS_PER_TASK (5), SRUN_ARGS ("")

set -x

PARTITION=$1
JOB_NAME=$2
CONFIG=$3
WORK_DIR=$4
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-""}

PYTHONPATH="$(dirname "$0")/..":$PYTHONPATH \
srun -p "$PARTITION" \
    --job-name="$JOB_NAME" \
    --gres=gpu:"$GPUS_PER_NODE" \
    --ntasks="$GPUS" \
    --ntasks-per-node="$GPUS_PER_NODE" \
    --cpus-per-task="$CPUS_PER_TASK" \
    --kill-on-bad-exit=1 \
    $SRUN_ARGS \
    python -u "$(dirname "$0")/train.py" "$CONFIG" --work-dir="$WORK_DIR" \
    --launcher=slurm "${@:5}"
