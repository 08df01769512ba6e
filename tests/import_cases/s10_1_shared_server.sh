# from quick_start_serial.sh's guide, section 10.1: 共享服务器
TARGET_GPUS="0 1 2 3 4 5 6 7"
RESERVED_GPUS=2              # 为其他人预留
MAX_RETRY_TIMES=3            # 有限重试
RUN_IN_BACKGROUND=true

COMMANDS=(
    "python train.py --gpu \${available_gpu} --lr 0.001 | 25 | 1"
)
