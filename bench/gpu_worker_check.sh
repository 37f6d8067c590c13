#!/usr/bin/env bash
# GPU workers on a GPU host: the CUDA tests, the worker step on a resident
# model against the plain gradient step and PyTorch's, and short end-to-end
# trainings (two servers on the host's CPUs, GPU workers), each with the
# resident model on and off. Writes $OUT/summary.txt and $OUT/logs.tgz.
#
#   bench/gpu_worker_check.sh PACK.tar.xz
#
# PACK.tar.xz: ../shared/gpu-host/pack.sh of asgd_server, asgd_worker,
# asgd_eval, make_corpus, dnn_step_bench, replay_bench,
# server_capacity_bench, the cuda_*_test binaries and
# bench/torch_dnn_step.py (see
# docs/results/gpu-h200/README.md for the command).
set -u
OUT=${OUT:-$PWD/gpu-check-out}; mkdir -p "$OUT"
T0=$(date +%s)
L=/tmp/asgd-logs; mkdir -p $L
exec > >(tee -a "$OUT/summary.txt") 2>&1
save() { tar -czf "$OUT/logs.tgz" -C $L . 2>/dev/null; }
trap save EXIT
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
P=/tmp/asgd; mkdir -p $P
tar -xJf "${1:?usage: gpu_worker_check.sh PACK.tar.xz}" -C $P || { echo "unpack failed"; exit 1; }
B=$P/bin
CUB=$(dirname "$(find / -xdev -name 'libcublas.so.13*' -not -path '*/proc/*' 2>/dev/null | head -1)")
CRT=$(dirname "$(find / -xdev -name 'libcudart.so.13*' -not -path '*/proc/*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$P/lib:$CUB:$CRT
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
el "env"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc

# STAGES: which parts run (all by default).
STAGES=${STAGES:-"tests bench demo overlap seed device_replay replay shards lstm pipeline server"}
has() { [[ " $STAGES " == *" $1 "* ]]; }
if has tests; then
el "gpu tests"
for t in ${TESTS:-cuda_backend_test cuda_conv_test cuda_lstm_test cuda_resident_test cuda_replay_test cuda_layer_range_test}; do
  timeout 150 $B/$t > $L/10_$t.txt 2>&1; echo "$t rc=$?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|Failure|means_off" $L/10_$t.txt | head -12
done

fi

if has bench; then
save; el "step bench: gradient step, worker step (1-bit, float32), PyTorch"
bench() {  # name flags...
  local name=$1; shift
  timeout 120 $B/dnn_step_bench --backends=cuda --cuda_math=tf32 --batches=256 \
    --sequences=16 --iters=30 "$@" > $L/20_$name.txt 2>&1; echo "$name rc=$?"
  grep -E "^\| [a-z]" $L/20_$name.txt; grep -E "loaded onto" $L/20_$name.txt | head -4
}
bench gradient --models=dnn,cnn,lstm,blstm
bench worker_onebit --models=dnn,cnn,lstm,blstm --worker_step --push_encoding=onebit
# The CNN's conv weight gradients as one GEMM per block (the default sums
# slices of a strided batch): compare with worker_onebit's cnn row.
bench worker_onebit_cnn_one_dw_gemm --models=cnn --worker_step --push_encoding=onebit --cuda_conv_dw_slice_rows=1000000000
bench worker_onebit_unstaged --models=dnn,lstm --worker_step --push_encoding=onebit --stage_batches=false
bench worker_onebit_k4 --models=dnn --worker_step --push_encoding=onebit --push_every=4
bench worker_float32 --models=dnn --worker_step --push_encoding=float32
bench worker_bf16 --models=dnn --worker_step --push_encoding=bf16
bench worker_topk --models=dnn --worker_step --push_encoding=topk
# Where each layer's passes spend their device time, step by step: the pass
# totals and every step of at least 20% of its pass (the rest in the logs).
timeout 120 $B/dnn_step_bench --backends=cuda --cuda_math=tf32 --batches=256 \
  --sequences=16 --iters=10 --models=cnn,dnn,lstm,blstm --cuda_profile \
  > $L/23_profile.txt 2>&1; echo "profile rc=$?"
awk -F'|' '/^## /; /^\| / && ($4 ~ /total/ || $7 + 0 >= 20)' $L/23_profile.txt
timeout 120 $B/replay_bench --backend=cuda --threads=1,4,8 > $L/22_replay.txt 2>&1
echo "replay_bench rc=$?"; grep -E "^\| |^# check" $L/22_replay.txt
timeout 150 python3 $B/torch_dnn_step.py --models=dnn,cnn,lstm,blstm --iters=30 \
  > $L/21_torch.txt 2>&1; echo "torch rc=$?"
grep -E "^\| [a-z]+ \| torch-cuda(\+copies)? \| tf32 \| (256|16) x" $L/21_torch.txt

fi

save; el "corpus"
timeout 120 $B/make_corpus --out=$P/corpus --jobs=16 --text_dir=$P/text > $L/30_corpus.txt 2>&1
echo "corpus rc=$?"; tail -1 $L/30_corpus.txt
# start_pool DIR SERVER_FLAGS...: two servers on this host, logs and port
# files in DIR; sets POOL_PIDS and S (their addresses).
start_pool() {
  local d=$1 s i addrs=(); shift; POOL_PIDS=()
  for s in 0 1; do
    $B/asgd_server --host=127.0.0.1 --port=0 --port_file=$d/port.$s --server_index=$s \
      --num_servers=2 "$@" > $d/server-$s.log 2>&1 & POOL_PIDS+=($!)
  done
  for s in 0 1; do for i in $(seq 100); do [ -s $d/port.$s ] && break; sleep 0.1; done
    addrs+=("127.0.0.1:$(cat $d/port.$s)"); done
  S=$(IFS=,; echo "${addrs[*]}")
}
run_e2e() {  # name workers epochs hidden [worker flags...]
  local name=$1 nw=$2 ep=$3 hid=$4; shift 4
  local d=$P/run-$name; mkdir -p $d; local w
  start_pool $d --num_shards=${SHARDS:-2} ${SRV:---model=dnn --hidden=$hid --learning_rate=0.05}
  local t0=$(date +%s.%N) wp=()
  for ((w = 0; w < nw; w++)); do
    timeout 150 $B/asgd_worker --servers=$S --corpus=$P/corpus --worker_index=$w \
      --num_workers=$nw --epochs=$ep --backend=cuda --log_every=1000 "$@" \
      > $d/worker-$w.log 2>&1 & wp+=($!)
  done
  for p in "${wp[@]}"; do wait $p; done
  local t1=$(date +%s.%N)
  # The evaluation runs on the CPU: all cores (the seed-size model needs them).
  local acc=$(OPENBLAS_NUM_THREADS=$(nproc) timeout 60 $B/asgd_eval --servers=$S \
    --corpus=$P/corpus 2>&1 | tail -1)
  kill "${POOL_PIDS[@]}" 2>/dev/null; wait "${POOL_PIDS[@]}" 2>/dev/null
  { echo "== $name: $nw x cuda, $ep epochs, hidden $hid, flags: $*"
    echo "wall $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s; eval: $acc"
    grep -hE "done:|phases|memory:|rror" $d/worker-*.log | head -12; } | tee -a $L/40_e2e.txt
  cp $d/worker-0.log $L/41_worker0_$name.log 2>/dev/null; save
}
el "e2e"
if has demo; then  # the demo DNN (512 x 2) to its held-out accuracy
  run_e2e demo1_host 1 3 512,512 --resident_model=off
  run_e2e demo1 1 3 512,512
  run_e2e demo1_1bit 1 3 512,512 --push_encoding=onebit
  run_e2e demo4_1bit 4 3 512,512 --push_encoding=onebit
  run_e2e demo4 4 3 512,512
fi
if has overlap; then  # more minibatches per pulled model (more staleness)
  run_e2e demo1_1bit_ov3 1 3 512,512 --push_encoding=onebit --max_overlapped_steps=3
  run_e2e demo4_1bit_ov3 4 3 512,512 --push_encoding=onebit --max_overlapped_steps=3
fi
if has seed; then  # the seed's DNN size (5 x 2048): throughput in SEED_S (20) s
  SEED=2048,2048,2048,2048,2048 SEED_S=${SEED_S:-20}
  run_e2e seed1_1bit_host 1 1 $SEED --time_budget_s=$SEED_S --push_encoding=onebit --resident_model=off
  run_e2e seed1_1bit 1 1 $SEED --time_budget_s=$SEED_S --push_encoding=onebit
  run_e2e seed1_1bit_ov3 1 1 $SEED --time_budget_s=$SEED_S --push_encoding=onebit --max_overlapped_steps=3
  run_e2e seed1 1 1 $SEED --time_budget_s=$SEED_S
  run_e2e seed4_1bit 4 1 $SEED --time_budget_s=$SEED_S --push_encoding=onebit
fi
if has device_replay; then  # the exact copies on the GPU (--replay_on_device)
  SEED=2048,2048,2048,2048,2048 SEED_S=${SEED_S:-20}
  run_e2e seed1_bf16 1 1 $SEED --time_budget_s=$SEED_S --push_encoding=bf16
  run_e2e seed1_topk 1 1 $SEED --time_budget_s=$SEED_S --push_encoding=topk
  run_e2e demo1_1bit_dev 1 3 512,512 --push_encoding=onebit --replay_on_device
  run_e2e demo4_1bit_dev 4 3 512,512 --push_encoding=onebit --replay_on_device
  run_e2e seed1_1bit_dev 1 1 $SEED --time_budget_s=$SEED_S --push_encoding=onebit --replay_on_device
  run_e2e seed1_1bit_ov3_dev 1 1 $SEED --time_budget_s=$SEED_S --push_encoding=onebit \
    --max_overlapped_steps=3 --replay_on_device
  run_e2e seed4_1bit_dev 4 1 $SEED --time_budget_s=$SEED_S --push_encoding=onebit --replay_on_device
fi
if has replay; then  # delta-pull replay on 1 thread per server against the default
  SEED=2048,2048,2048,2048,2048 SEED_S=${SEED_S:-20}
  for r in 1 0; do
    run_e2e seed1_1bit_replay$r 1 1 $SEED --time_budget_s=$SEED_S --push_encoding=onebit --replay_threads=$r
    run_e2e seed1_1bit_ov3_replay$r 1 1 $SEED --time_budget_s=$SEED_S --push_encoding=onebit \
      --max_overlapped_steps=3 --replay_threads=$r
    run_e2e seed4_1bit_replay$r 4 1 $SEED --time_budget_s=$SEED_S --push_encoding=onebit --replay_threads=$r
  done
  for r in 1 0; do
    timeout 60 $B/server_capacity_bench --shards=8 --workers=4 --duration_s=3 \
      --push_encodings=onebit --pulls=overlapped --replay_threads=$r > $L/51_replay_$r.txt 2>&1
    echo "capacity replay_threads=$r rc=$?"; grep -E "^\| overlapped" $L/51_replay_$r.txt
  done
fi
if has shards; then  # 4 shards per server (SHARDS: 2 elsewhere): faster applies
  SEED=2048,2048,2048,2048,2048 SEED_S=${SEED_S:-20}
  SHARDS=4 run_e2e seed1_1bit_sh4 1 1 $SEED --time_budget_s=$SEED_S --push_encoding=onebit
  SHARDS=4 run_e2e seed1_1bit_ov3_sh4 1 1 $SEED --time_budget_s=$SEED_S --push_encoding=onebit \
    --max_overlapped_steps=3
  SHARDS=4 run_e2e seed4_1bit_sh4 4 1 $SEED --time_budget_s=$SEED_S --push_encoding=onebit
  SHARDS=4 run_e2e seed4_1bit_ov3_sh4 4 1 $SEED --time_budget_s=$SEED_S --push_encoding=onebit \
    --max_overlapped_steps=3
fi
if has lstm; then  # LSTM and BLSTM 1 x 128, 2 epochs, 1 and 4 workers
  SRV="--model=lstm --lstm_layers=1 --lstm_cells=128 --context=2 --learning_rate=0.3"
  run_e2e lstm1_host 1 2 - --resident_model=off
  run_e2e lstm1 1 2 -
  run_e2e lstm4_1bit 4 2 - --push_encoding=onebit
  SRV="--model=blstm --lstm_layers=1 --lstm_cells=128 --context=2 --learning_rate=0.3"
  run_e2e blstm1_host 1 2 - --resident_model=off
  run_e2e blstm1 1 2 -
  run_e2e blstm4_1bit 4 2 - --push_encoding=onebit
  SRV=
fi
run_pipe() {  # name backends (one per stage: cpu,cuda,...) epochs hidden [flags...]
  local name=$1 backs=$2 ep=$3 hid=$4; shift 4
  local d=$P/run-$name; mkdir -p $d; local sp=() s next=""
  local stage_backends; IFS=, read -ra stage_backends <<<"$backs"
  local n=${#stage_backends[@]}
  start_pool $d --num_shards=2 --model=dnn --hidden=$hid --learning_rate=0.05
  local t0=$(date +%s.%N)
  for ((s = n - 1; s >= 0; s--)); do  # the last stage first: it listens
    timeout 300 $B/asgd_worker --servers=$S --corpus=$P/corpus --mode=pipeline \
      --stages=$n --stage=$s --epochs=$ep --backend=${stage_backends[$s]} \
      --log_every=1000 ${next:+--next_stage=$next} "$@" > $d/stage-$s.log 2>&1 & sp+=($!)
    if ((s > 0)); then
      for i in $(seq 300); do  # until it listens, or has failed
        grep -q "on port [0-9]\|^asgd_worker: " $d/stage-$s.log && break
        sleep 0.1
      done
      next=$(sed -n 's/.* on port \([0-9]*\)$/\1/p' $d/stage-$s.log)
      [ -n "$next" ] || { echo "$name: stage $s did not listen"; break; }
      next="127.0.0.1:$next"
    fi
  done
  for p in "${sp[@]}"; do wait $p; done
  local t1=$(date +%s.%N)
  local acc=$(OPENBLAS_NUM_THREADS=$(nproc) timeout 60 $B/asgd_eval --servers=$S \
    --corpus=$P/corpus 2>&1 | tail -1)
  kill "${POOL_PIDS[@]}" 2>/dev/null; wait "${POOL_PIDS[@]}" 2>/dev/null
  { echo "== $name: stages on $backs, $ep epochs, hidden $hid, flags: $*"
    echo "wall $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s; eval: $acc"
    grep -hE "layers on|done|rror" $d/stage-*.log | head -12; } | tee -a $L/45_pipeline.txt
  save
}
if has pipeline; then  # pipeline stages on the CPU and on the GPU (demo DNN)
  run_pipe pipe2_cpu cpu,cpu 1 512,512
  run_pipe pipe2_cuda cuda,cuda 1 512,512
  run_pipe pipe2_mixed cpu,cuda 1 512,512
  run_pipe pipe3_cuda_seed cuda,cuda,cuda 1 2048,2048,2048,2048,2048 --time_budget_s=${SEED_S:-20}
fi
if has server; then  # one server process's pushes/s for the seed DNN, 16 cores
  save; el "server capacity"
  for sh in 2 8; do
    timeout 120 $B/server_capacity_bench --shards=$sh --workers=1,4,8 --duration_s=3 \
      --push_encodings=fp32,onebit --pulls=overlapped > $L/50_capacity_$sh.txt 2>&1
    echo "capacity shards=$sh rc=$?"; grep -E "^\||saturat" $L/50_capacity_$sh.txt
  done
fi
el "done"
