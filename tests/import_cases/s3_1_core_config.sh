#!/bin/bash
# from quick_start_serial.sh's guide, section 3.1: the core settings at the top of the script (no commands yet)

# 第2行：GPU资源池
TARGET_GPUS="0 1 2 3 4 5 6 7 8 9"  # 或 "all" 表示所有GPU

# 第3行：日志目录
LOG_DIR="/home/hdl/project/fgvr_test/logs/quick_start"

# 第4行：预留GPU数量
RESERVED_GPUS=1

# 第5行：最大重试次数
MAX_RETRY_TIMES=-1

# 第6行：后台运行模式
RUN_IN_BACKGROUND=true

# 第7行：极限资源利用模式（🆕 v2.2）
EXTREME_MODE=false

# 第8行：GPU共享模式
ALLOW_SHARED_GPU=true

# 第9行：调试模式（🆕 v2.2）
DEBUG_MODE=false
