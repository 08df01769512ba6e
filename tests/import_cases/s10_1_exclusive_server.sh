# from quick_start_serial.sh's guide, section 10.1: 独占服务器
TARGET_GPUS="0 1 2 3"
RESERVED_GPUS=0              # 不预留
MAX_RETRY_TIMES=-1           # 无限重试
RUN_IN_BACKGROUND=true

COMMANDS=(
    "bash /home/user/scripts/run.sh | 20 | 1"
)
