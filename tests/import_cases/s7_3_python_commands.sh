# from quick_start_serial.sh's guide, section 7.3: python commands in a COMMANDS array
COMMANDS=(
    # 单卡命令 - 使用CUDA_VISIBLE_DEVICES
    "CUDA_VISIBLE_DEVICES=\${available_gpu} python train.py --epochs 100 | 18 | 1"
    # 单卡命令 - 使用--gpu参数
    "python train.py --gpu \${available_gpu} --lr 0.001 | 20 | 1"
    # 多卡命令 - PyTorch DDP
    "CUDA_VISIBLE_DEVICES=\${available_gpu_0},\${available_gpu_1} python -m torch.distributed.launch train.py | 40 | 2"
    # 多卡命令 - 自定义参数
    "python train_multi.py --gpus \${available_gpu_0} \${available_gpu_1} \${available_gpu_2} | 50 | 3"
)
