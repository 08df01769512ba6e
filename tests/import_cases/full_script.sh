#!/bin/bash
TARGET_GPUS="all"
LOG_DIR="$HOME/exp/logs/quick_start"
RESERVED_GPUS=2
MAX_RETRY_TIMES=3
RUN_IN_BACKGROUND=true
EXTREME_MODE=true
ALLOW_SHARED_GPU=true
DEBUG_MODE=false

COMMANDS=(
    # stage 1: data
    "python preprocess.py --input data/ --output processed/ | 0 | 0"
    # "python old_experiment.py | 10 | 1"      (disabled)
    'python eval.py --split "val set" --gpu ${available_gpu} | 12 | 1'
    "python train.py --gpu \${available_gpu} 2>&1 | tee train.log | 20 | 1"
    "awk '{print \$1}' results.txt | sort | uniq -c | 0 | 0"
    "python -c \"print(f'{1+1}')\" | 0 | 0"
    "docker ps --format '{{.Names}}' | 0 | 0"
    "python ddp.py --gpus \${available_gpu_0},\${available_gpu_1} --name {name} | 40 | 2"
)
COMMANDS+=(
    "bash scripts/run_pipeline.sh aircraft --gpu \${available_gpu} | 35 | 1"
    "bash scripts/run_pipeline.sh aircraft --gpu \${available_gpu} | 35 | 1"
)

CHECK_INTERVAL=3

get_available_gpus() {
    local TARGET_GPUS="0"
    RESERVED_GPUS=5
    echo "scanning"
}

for cmd in "${COMMANDS[@]}"; do
    IFS='|' read -r c mem n <<< "$cmd"
done
