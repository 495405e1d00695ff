#!/usr/bin/env bash
# Train with one process per GPU (per CPU process where CUDA is missing:
# those run with the gloo backend) on NNODES nodes, through torchrun.
#
# Usage: bash tools/dist_train.sh CONFIG GPUS [train.py arguments]
# Environment: NNODES (1), NODE_RANK (0), PORT (29500),
#              MASTER_ADDR (127.0.0.1)

CONFIG=$1
GPUS=$2
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
    "$(dirname "$0")/train.py" \
    "$CONFIG" \
    --launcher pytorch "${@:3}"
