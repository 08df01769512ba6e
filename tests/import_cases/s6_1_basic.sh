#!/bin/bash
# from quick_start_serial.sh's guide, section 6.1: steps 2 and 3
TARGET_GPUS="0 1 2 3"
RESERVED_GPUS=1
MAX_RETRY_TIMES=3
RUN_IN_BACKGROUND=true

COMMANDS=(
    "bash scripts/run_pipeline.sh aircraft --gpu \${available_gpu} | 35 | 1"
    "python train.py --gpu \${available_gpu} --epochs 100 | 20 | 1"
)
