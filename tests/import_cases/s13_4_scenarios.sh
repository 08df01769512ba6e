# from quick_start_serial.sh's guide, section 13.4 场景3：混合模式 (the later assignments of the other scenarios are ignored:
# the first one of each setting wins, as the script's config lines come first)
TARGET_GPUS="0 1 2 3"
RESERVED_GPUS=1              # 留1张
ALLOW_SHARED_GPU=false       # 独占模式（严格）
MAX_RETRY_TIMES=-1           # 无限重试

COMMANDS=(
    "python train.py --gpu \${available_gpu} | 25 | 1"
)
