# from quick_start_serial.sh's guide, section 14.5 场景3：共享服务器（礼貌模式）
TARGET_GPUS="all"
RESERVED_GPUS=2               # 预留2张
EXTREME_MODE=false
ALLOW_SHARED_GPU=true         # 允许共享
MAX_RETRY_TIMES=3
RUN_IN_BACKGROUND=true
DEBUG_MODE=false

COMMANDS=(
    "python train.py --dataset cub --gpu \${available_gpu} | 20 | 1"
    "python train.py --dataset cars --gpu \${available_gpu} | 20 | 1"
)
