# from quick_start_serial.sh's guide, section 14.5 场景4：调试排错 (and 14.7 技巧1)
TARGET_GPUS="0 1"
RESERVED_GPUS=0
EXTREME_MODE=false
ALLOW_SHARED_GPU=true
MAX_RETRY_TIMES=1             # 有限重试
RUN_IN_BACKGROUND=false       # 前台运行
DEBUG_MODE=true               # 开启调试

COMMANDS=(
    "your_problematic_command | 20 | 1"
)
