COMMANDS=(
    "python train.py | 20 | 1"
    "python never_closed.py | 20 | 1
