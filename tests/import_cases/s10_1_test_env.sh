# from quick_start_serial.sh's guide, section 10.1: 测试环境
TARGET_GPUS="0 1"
RESERVED_GPUS=0
MAX_RETRY_TIMES=0            # 不重试，快速失败
RUN_IN_BACKGROUND=false      # 前台运行，便于调试

COMMANDS=(
    "echo TEST | 0 | 0"
)
