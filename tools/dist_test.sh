#!/usr/bin/env bash
# Test with one process per GPU (per CPU process where CUDA is missing:
# those run with the gloo backend) on NNODES nodes, through torchrun.
#
# Usage: bash tools/dist_test.sh CONFIG CHECKPOINT GPUS [test.py arguments]
# Environment: NNODES (1), NODE_RANK (0), PORT (29500),
#              MASTER_ADDR (127.0.0.1)

CONFIG=$1
CHECKPOINT=$2
GPUS=$3
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}

PYTHONPATH="$(dirname "$0")/..":$PYTHONPATH \
torchrun \
    --nnodes="$NNODES" \
    --node_rank="$NODE_RANK" \
    --master_addr="$MASTER_ADDR" \
    --nproc_per_node="$GPUS" \
    --master_port="$PORT" \
    "$(dirname "$0")/test.py" \
    "$CONFIG" \
    "$CHECKPOINT" \
    --launcher pytorch "${@:4}"
