#!/usr/bin/env bash
# Teacher-student training with the teacher's posteriors read from an
# archive (asgd_worker --teacher_posteriors) against the teacher's forward
# pass on every worker (--teacher_model) and the student alone, on the
# built-in corpus's Kaldi export (docs/results/compression/). The teacher:
# a 512-512 DNN trained by one worker; the students: 128-128 DNNs trained
# by 2 workers through 2 servers (2 shards each), 3 epochs each. Writes
# $OUT/teacher_archive.txt.
#
#   scripts/teacher_archive_experiment.sh   # about 6 minutes on 2 cores
#
# Environment:
#   OUT       where the result goes (default docs/results/compression)
#   WORKDIR   corpus, logs and models (default /tmp/asgd-teacher)
#   EPOCHS    the students' epochs (default 3)
#   TEACHER   teacher-student flags (default "--teacher_weight=0.5
#             --teacher_temperature=2")
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-docs/results/compression}
WORKDIR=${WORKDIR:-/tmp/asgd-teacher}
EPOCHS=${EPOCHS:-3}
TEACHER=${TEACHER:-"--teacher_weight=0.5 --teacher_temperature=2"}

source scripts/lib.sh
asgd_build
mkdir -p "$OUT" "$WORKDIR/logs"
asgd_kaldi_corpus "$WORKDIR"
KALDI="$WORKDIR/kaldi"
CMVN="$WORKDIR/global_cmvn.mat"
data=(--kaldi_data="$KALDI/train" --kaldi_alignments="$KALDI/train/pdf.ark"
      --kaldi_global_cmvn="$CMVN")

# train NAME HIDDEN WORKERS EPOCHS [worker flags...]: prints the wall time in
# seconds; the model lands in $WORKDIR/NAME.mdl.
train() {
  local name=$1 hidden=$2 workers=$3 epochs=$4 w pids=() start
  shift 4
  asgd_start_servers 2 "$WORKDIR/logs/$name" --num_shards=2 --hidden="$hidden" \
    --learning_rate=0.05 --log_every_s=0
  start=$(date +%s.%N)
  for ((w = 0; w < workers; w++)); do
    "$BIN/worker/asgd_worker" --servers="$SERVERS" --log_every=0 "${data[@]}" \
      --worker_index=$w --num_workers="$workers" --epochs="$epochs" \
      --save_model="$WORKDIR/$name.w$w.mdl" "$@" \
      >"$WORKDIR/logs/$name/worker-$w.log" 2>&1 &
    pids+=($!)
  done
  for ((w = 0; w < workers; w++)); do
    wait "${pids[$w]}" || { cat "$WORKDIR/logs/$name/worker-$w.log" >&2; exit 1; }
  done
  calc "$(date +%s.%N) - $start"
  asgd_cleanup
  cp "$(ls -t "$WORKDIR/$name".w*.mdl | head -1)" "$WORKDIR/$name.mdl"
}

calc() { awk "BEGIN { printf \"%.2f\", $1 }"; }

accuracy() {
  "$BIN/worker/asgd_eval" --model="$1" --kaldi_data="$KALDI/heldout" \
    --kaldi_alignments="$KALDI/heldout/pdf.ark" --kaldi_global_cmvn="$CMVN" |
    sed -n 's/^held-out frame accuracy: \([0-9.]*\)%$/\1/p'
}

echo "== the teacher (512,512, 1 worker, 3 epochs)"
teacher_s=$(train teacher 512,512 1 3)
start=$(date +%s.%N)
"$BIN/worker/asgd_forward" --model="$WORKDIR/teacher.mdl" \
  --kaldi_data="$KALDI/train" --kaldi_global_cmvn="$CMVN" --log_posteriors \
  --out="$WORKDIR/teacher.ark" --out_scp="$WORKDIR/teacher.scp" >/dev/null
archive_s=$(calc "$(date +%s.%N) - $start")

{
  echo "# scripts/teacher_archive_experiment.sh, $(date -u +%F): students 128,128, 2 workers, $EPOCHS epochs; $TEACHER"
  echo "run,held_out_percent,training_seconds"
  echo "teacher (512,512),$(accuracy "$WORKDIR/teacher.mdl"),$teacher_s"
  echo "teacher archive (asgd_forward over the training set),-,$archive_s"
  for run in alone model archive; do
    case $run in
      alone) flags=() ;;
      model) flags=(--teacher_model="$WORKDIR/teacher.mdl" $TEACHER) ;;
      archive) flags=(--teacher_posteriors="$WORKDIR/teacher.scp" $TEACHER) ;;
    esac
    s=$(train "student-$run" 128,128 2 "$EPOCHS" "${flags[@]}")
    echo "student $run,$(accuracy "$WORKDIR/student-$run.mdl"),$s"
  done
} | tee "$OUT/teacher_archive.txt"
