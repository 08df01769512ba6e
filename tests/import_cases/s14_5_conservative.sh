# from quick_start_serial.sh's guide, section 14.5 场景2：保守模式（大模型训练）
TARGET_GPUS="0 1 2 3"
RESERVED_GPUS=1
EXTREME_MODE=false            # 禁用极限模式
ALLOW_SHARED_GPU=false        # 独占GPU
MAX_RETRY_TIMES=3
RUN_IN_BACKGROUND=true
DEBUG_MODE=false

COMMANDS=(
    "CUDA_VISIBLE_DEVICES=\${available_gpu_0},\${available_gpu_1} torchrun --nproc_per_node 2 train_llm.py | 70 | 2"
)
