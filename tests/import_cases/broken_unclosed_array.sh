COMMANDS=(
    "python train.py | 20 | 1"
