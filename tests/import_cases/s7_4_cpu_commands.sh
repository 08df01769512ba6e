# from quick_start_serial.sh's guide, section 7.4 (CPU commands) and 10.2.4 (a test command)
COMMANDS=(
    "python preprocess.py --input data/ --output processed/ | 0 | 0"
    "bash scripts/analyze.sh | 0 | 0"
    "echo TEST | 0 | 0"
)
