#!/usr/bin/env bash
# Check who holds each GPU and what each job used on a real NVIDIA GPU, with real CUDA processes (no fake layer):
#   1. `gtui gpus` and `gtui gpus --json` on the real NVML backend;
#   2. a foreign CUDA process (torch, ~3 GiB, sleeping) shows in `gtui gpus` as a holder;
#   3. a small queue run headless (`gtui run`, no tmux) with a job allocating ~2 GiB through
#      torch; the job's recorded peak GPU memory read back from `gtui status --json`.
#   4. a job too big to fit beside the holder: its waiting reason names the holder;
#   5. a `mem = "auto"` job run twice: the second run asks for the first run's peak + margin;
#   6. each GPU's health (Xid events, ECC, pending retirement/remap, clock reasons) read through
#      NVML: which fields the card supports (n/a where not), and no fault on a healthy card;
#   7. each GPU's power draw, power limit and total-energy counter, read twice two seconds
#      apart (n/a where not supported), and the kWh `gtui report --json` gives step 3's job.
#
# Runs where python3 has torch, psutil and nvidia-ml-py; gtui's other dependencies (textual,
# tomlkit, tomli-w) may come through PYTHONPATH. gtui itself is taken from this checkout (its
# `app/` folder is the source root, `app/gtui` the package), so nothing needs installing. No
# network is used.
#
#   bash scripts/gpu_check.sh            # output to stdout, and to $OUT/gpu_check.log if set
#
# Every step has a timeout; the foreign process and the scheduler are killed on exit. Exit 0
# when every check passed, 1 when one failed (the log says which).
set -uo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python3}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/gtui-gpu-check.XXXXXX")"
LOG="$WORK/gpu_check.log"
if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT"
    LOG="$OUT/gpu_check.log"
fi
: >"$LOG"
exec > >(tee -a "$LOG") 2>&1

FOREIGN_PID=""
FAILED=0
RUN_PID=""
cleanup() {
    if [ -n "$RUN_PID" ] && kill -0 "$RUN_PID" 2>/dev/null; then
        kill "$RUN_PID" 2>/dev/null  # gtui run stops on SIGTERM; its job is killed with it
        wait "$RUN_PID" 2>/dev/null
    fi
    if [ -n "$FOREIGN_PID" ] && kill -0 "$FOREIGN_PID" 2>/dev/null; then
        kill "$FOREIGN_PID" 2>/dev/null
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            kill -0 "$FOREIGN_PID" 2>/dev/null || break
            sleep 0.5
        done
        kill -9 "$FOREIGN_PID" 2>/dev/null
    fi
    if [ -n "${OUT:-}" ] && [ -d "$WORK/q" ]; then
        cp -r "$WORK/q/logs" "$OUT/job_logs" 2>/dev/null
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '\n===== %s =====\n' "$*"; }
ok() { printf 'CHECK OK: %s\n' "$*"; }
bad() { printf 'CHECK FAILED: %s\n' "$*"; FAILED=1; }

# gtui from this checkout: app/ is the source root (src layout), app/gtui the package.
export PYTHONPATH="$REPO/app${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
unset GTUI_FAKE_GPUS
gtui() { timeout "${GTUI_TIMEOUT:-60}" "$PY" -m gtui "$@"; }

step "environment"
date -u
uname -a
id
command -v nvidia-smi >/dev/null && timeout 30 nvidia-smi
"$PY" --version
timeout 120 "$PY" - <<'EOF'
import importlib
for name in ("gtui", "psutil", "pynvml", "torch", "textual", "tomlkit", "tomli_w"):
    try:
        m = importlib.import_module(name)
        print(f"{name:8} {getattr(m, '__version__', '?')}  {getattr(m, '__file__', '')}")
    except Exception as e:
        print(f"{name:8} MISSING ({type(e).__name__}: {e})")
try:
    import torch
    print("torch.cuda.is_available():", torch.cuda.is_available(), torch.version.cuda)
except Exception:
    pass
EOF

step "1. gtui gpus (real NVML)"
gtui gpus || bad "gtui gpus exited $?"
step "1. gtui gpus --json"
gtui gpus --json >"$WORK/gpus.json" && cat "$WORK/gpus.json" || bad "gtui gpus --json exited $?"
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d and all("mem_total_mib" in g for g in d); print(len(d), "GPU(s) in --json")' \
    "$WORK/gpus.json" && ok "gtui gpus --json lists the GPUs" || bad "gtui gpus --json has no GPU"

step "2. a foreign CUDA process holding ~3 GiB"
READY="$WORK/foreign.ready"
"$PY" - "$READY" <<'EOF' &
import os, sys, time
import torch
x = torch.empty(3 * 1024**3, dtype=torch.uint8, device="cuda:0")
x.fill_(1)
torch.cuda.synchronize()
open(sys.argv[1], "w").write(str(os.getpid()))
print(f"foreign holder pid {os.getpid()} allocated {x.numel() / 1024**3:.1f} GiB on cuda:0", flush=True)
time.sleep(600)
EOF
FOREIGN_PID=$!
for _ in $(seq 1 240); do
    [ -s "$READY" ] && break
    kill -0 "$FOREIGN_PID" 2>/dev/null || break
    sleep 0.5
done
if [ -s "$READY" ]; then
    ok "foreign process $FOREIGN_PID holds ~3 GiB"
    sleep 1  # let NVML's process accounting catch up with the allocation
    step "2. gtui gpus with the foreign holder"
    gtui gpus | tee "$WORK/gpus2.txt"
    if grep -q "$FOREIGN_PID" "$WORK/gpus2.txt"; then
        ok "gtui gpus names the holder pid $FOREIGN_PID"
    else
        bad "gtui gpus does not show pid $FOREIGN_PID (in a container NVML may report host pids)"
    fi
    gtui gpus --json >"$WORK/gpus2.json"
    "$PY" - "$WORK/gpus2.json" "$FOREIGN_PID" <<'EOF' || FAILED=1
import json, sys
gpus = json.load(open(sys.argv[1])); pid = int(sys.argv[2])
found = [(g["index"], p) for g in gpus for p in g.get("processes", []) if p.get("pid") == pid]
for index, p in found:
    print(f"GPU {index}: holder {json.dumps(p)}")
if not found:
    print(f"CHECK FAILED: pid {pid} not among the GPU processes in --json"); sys.exit(1)
print("CHECK OK: --json lists the holder")
EOF
else
    bad "the foreign torch process did not start (is torch with CUDA installed?)"
fi

step "3. a queue run headless: one job allocating ~2 GiB through torch"
mkdir -p "$WORK/q"
cat >"$WORK/q/alloc.py" <<'EOF'
import time
import torch
x = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda")
x.fill_(1)
torch.cuda.synchronize()
print(f"allocated {torch.cuda.memory_allocated() / 1024**3:.2f} GiB, "
      f"reserved {torch.cuda.memory_reserved() / 1024**3:.2f} GiB", flush=True)
time.sleep(8)
print("done", flush=True)
EOF
cat >"$WORK/q/check.toml" <<EOF
[settings]
poll = "0.5s"
log_dir = "logs"
neighbours = false

[[jobs]]
name = "alloc2g"
cmd = "$PY alloc.py"
gpus = 1
mem = "6G"
EOF
cat "$WORK/q/check.toml"
GTUI_TIMEOUT=300 gtui run "$WORK/q/check.toml" --no-tmux &
RUN_PID=$!
# While the job holds its memory: gtui gpus names it as a gtui job, beside the foreign holder.
for _ in $(seq 1 240); do
    grep -qs "allocated" "$WORK"/q/logs/alloc2g.*.log && break
    kill -0 "$RUN_PID" 2>/dev/null || break
    sleep 0.5
done
if grep -qs "allocated" "$WORK"/q/logs/alloc2g.*.log; then
    sleep 1
    step "3. gtui gpus while the job runs"
    gtui gpus
fi
wait "$RUN_PID"
rc=$?
[ "$rc" -eq 0 ] && ok "gtui run exited 0" || bad "gtui run exited $rc"
echo "--- the job's log"
cat "$WORK"/q/logs/alloc2g.*.log 2>/dev/null
step "3. the job's recorded memory (gtui status --json)"
gtui status "$WORK/q/check.toml" --json >"$WORK/status.json" || bad "gtui status --json exited $?"
"$PY" - "$WORK/status.json" <<'EOF' || FAILED=1
import json, sys
doc = json.load(open(sys.argv[1]))
job = next(j for j in doc["jobs"] if j["name"] == "alloc2g")
keys = [k for k in job if "peak" in k or "gpu_hours" in k or k in ("state", "gpus", "mem_mib")]
print(json.dumps({k: job[k] for k in keys}, indent=2))
peak = job.get("peak_mib")
if not peak:
    print("CHECK FAILED: no peak GPU memory recorded"); sys.exit(1)
if peak < 2048:
    print(f"CHECK FAILED: peak {peak} MiB is below the 2 GiB the job allocated"); sys.exit(1)
print(f"CHECK OK: recorded peak GPU memory {peak} MiB ({peak / 1024:.2f} GiB)")
EOF

step "3. gtui status (text)"
gtui status "$WORK/q/check.toml"

step "4. a job that cannot fit beside the foreign holder: its waiting reason names the holder"
TOTAL_MIB=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["mem_total_mib"])' "$WORK/gpus.json")
NEED_MIB=$((TOTAL_MIB - 2048))
mkdir -p "$WORK/w"
printf '[settings]\npoll = "0.5s"\nlog_dir = "logs"\nneighbours = false\n\n[[jobs]]\nname = "toobig"\ncmd = "true"\ngpus = 1\nmem = "%sM"\n' \
    "$NEED_MIB" >"$WORK/w/wait.toml"
if [ -n "$FOREIGN_PID" ] && kill -0 "$FOREIGN_PID" 2>/dev/null; then
    GTUI_TIMEOUT=120 gtui run "$WORK/w/wait.toml" --no-tmux >"$WORK/w/run.log" 2>&1 &
    WAIT_RUN=$!
    reason=""
    for _ in $(seq 1 60); do
        reason=$(gtui status "$WORK/w/wait.toml" --json 2>/dev/null |
            "$PY" -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["reason"])' 2>/dev/null)
        case "$reason" in *held*) break ;; esac
        sleep 0.5
    done
    echo "toobig (asks ${NEED_MIB} MiB of ${TOTAL_MIB}) waits: $reason"
    case "$reason" in
        *"held by"*) ok "the waiting reason names who holds the memory" ;;
        *) bad "the waiting reason does not name the holder: '$reason'" ;;
    esac
    gtui stop "$WORK/w/wait.toml" || true
    wait "$WAIT_RUN" 2>/dev/null
else
    bad "no foreign holder left for step 4"
fi

step "5. mem = auto: the second run asks for the first run's real peak plus a margin"
if [ -n "$FOREIGN_PID" ]; then
    kill "$FOREIGN_PID" 2>/dev/null
    wait "$FOREIGN_PID" 2>/dev/null
    FOREIGN_PID=""
fi
sed -e 's/^mem = "6G"/mem = "auto"/' -e 's/alloc2g/allocauto/' "$WORK/q/check.toml" >"$WORK/q/auto.toml"
GTUI_TIMEOUT=300 gtui run "$WORK/q/auto.toml" --no-tmux | tail -n 3
gtui retry "$WORK/q/auto.toml" allocauto
GTUI_TIMEOUT=300 gtui run "$WORK/q/auto.toml" --no-tmux | tail -n 3
gtui status "$WORK/q/auto.toml" --json >"$WORK/auto.json"
"$PY" - "$WORK/auto.json" "$TOTAL_MIB" <<'EOF' || FAILED=1
import json, sys
job = json.load(open(sys.argv[1]))["jobs"][0]
total = int(sys.argv[2])
print(json.dumps({k: job[k] for k in ("state", "attempt", "mem_mib", "peak_mib", "host_peak_mib", "gpu_hours")}))
mem, peak = job["mem_mib"], job["peak_mib"]
if job["attempt"] != 2 or not mem or not peak:
    print("CHECK FAILED: the second run or its figures are missing"); sys.exit(1)
if mem >= total // 2:
    print(f"CHECK FAILED: the second run asked {mem} MiB, not near the real peak"); sys.exit(1)
print(f"CHECK OK: the second run asked {mem} MiB from a recorded peak of {peak} MiB (GPU: {total} MiB)")
EOF

step "6. GPU health read on the real card (Xid event set, ECC, pending retirement/remap, clock reasons)"
timeout 120 "$PY" - <<'EOF' || FAILED=1
import sys
from gtui.core.gpus.health import judge
from gtui.core.gpus.nvml import NvmlBackend

backend = NvmlBackend()
snapshot = backend.read()
snapshot = backend.read()  # a second poll: the event sets are read again, without waiting
failed = False
for g in snapshot.gpus:
    h = g.health
    if h is None:
        print(f"CHECK FAILED: GPU {g.label}: no health read ({g.error})"); failed = True; continue
    na = [k for k, v in h.to_json().items() if v is None]
    verdict = judge(h)
    print(f"GPU {g.label} {g.name}: {h.to_json()}; n/a: {na or 'none'}; notes: {list(verdict.notes)}")
    if g.error:
        print(f"  field errors: {g.error}")
    if verdict.fault:
        print(f"CHECK FAILED: GPU {g.label} reads a fault on a card that should be healthy: {verdict.fault}")
        failed = True
backend.close()
if not snapshot.gpus:
    print("CHECK FAILED: no GPU read"); sys.exit(1)
if failed:
    sys.exit(1)
print("CHECK OK: every GPU's health read, no fault on a healthy card")
EOF

step "7. power and energy on the real card; the job's kWh in gtui report"
timeout 120 "$PY" - <<'EOF' || FAILED=1
import sys, time
from gtui.core.gpus.nvml import NvmlBackend

backend = NvmlBackend()
first = {g.label: g for g in backend.read().gpus}
time.sleep(2)
second = backend.read().gpus
backend.close()
if not second:
    print("CHECK FAILED: no GPU read"); sys.exit(1)
for g in second:
    before = first.get(g.label)
    rise = None
    if before is not None and before.energy_mj is not None and g.energy_mj is not None:
        rise = (g.energy_mj - before.energy_mj) / 1000  # J over the two seconds
    print(f"GPU {g.label} {g.name}: power {g.power_w} W of {g.power_limit_w} W; "
          f"energy counter {g.energy_mj} mJ; over 2 s: {rise} J")
    if rise is not None and rise < 0:
        print(f"CHECK FAILED: GPU {g.label}'s energy counter went backwards"); sys.exit(1)
print("CHECK OK: power and energy read (None: not supported by this card or driver)")
EOF
gtui report "$WORK/q/check.toml" --json >"$WORK/report.json" || bad "gtui report --json exited $?"
"$PY" - "$WORK/report.json" <<'EOF' || FAILED=1
import json, sys
doc = json.load(open(sys.argv[1]))
print(json.dumps(doc.get("energy"), indent=2))
if "energy" not in doc:
    print("CHECK FAILED: no energy block in gtui report --json"); sys.exit(1)
print("CHECK OK: the report's energy block")
EOF

step "result"
if [ "$FAILED" -eq 0 ]; then echo "ALL CHECKS PASSED"; else echo "SOME CHECKS FAILED"; fi
exit "$FAILED"
