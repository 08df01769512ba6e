# from quick_start_serial.sh's guide, section 14.5 场景1：极限性能（小任务批量处理）
TARGET_GPUS="all"             # 使用所有GPU
RESERVED_GPUS=0               # 不预留
EXTREME_MODE=true             # 极限模式
MAX_RETRY_TIMES=-1            # 无限重试
RUN_IN_BACKGROUND=true
DEBUG_MODE=false

COMMANDS=(
    "python eval.py --ckpt ckpt_01.pt --gpu \${available_gpu} | 10 | 1"
    "python eval.py --ckpt ckpt_02.pt --gpu \${available_gpu} | 10 | 1"
    "python eval.py --ckpt ckpt_03.pt --gpu \${available_gpu} | 10 | 1"
)
