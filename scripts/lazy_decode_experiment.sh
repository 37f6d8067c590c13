#!/usr/bin/env bash
# Lazy output evaluation on real frames (docs/results/compression/): the
# demo DNN trained from the built-in corpus's Kaldi export, then
# asgd_forward --active_pdfs --compare_full_layer on the held-out set, with
# per-frame pdf lists from the model's own beam (scripts/beam_active_pdfs.py:
# the pdfs within BEAM of each frame's best, a stand-in for a decoder's
# acoustic beam; no lattices without Kaldi). One OpenBLAS thread, as a
# decoder's core. Writes $OUT/lazy_decode.txt.
#
#   scripts/lazy_decode_experiment.sh   # about 3 minutes on 2 cores
#
# Environment:
#   OUT       where the result goes (default docs/results/compression)
#   WORKDIR   corpus, logs and models (default /tmp/asgd-lazy)
#   BEAMS     beams in natural log (default "1 2 4 8")
#   HIDDEN    the model's hidden layers (default 512,512)
#   EPOCHS    training epochs (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-docs/results/compression}
WORKDIR=${WORKDIR:-/tmp/asgd-lazy}
BEAMS=${BEAMS:-1 2 4 8}
HIDDEN=${HIDDEN:-512,512}
EPOCHS=${EPOCHS:-3}

source scripts/lib.sh
asgd_build
mkdir -p "$OUT" "$WORKDIR/logs"
asgd_kaldi_corpus "$WORKDIR"
KALDI="$WORKDIR/kaldi"

MODEL="$WORKDIR/model.mdl"
CMVN="$WORKDIR/global_cmvn.mat"
echo "== training the DNN ($HIDDEN, $EPOCHS epochs) from $KALDI/train"
asgd_start_servers 1 "$WORKDIR/logs" --num_shards=2 --hidden="$HIDDEN" \
  --learning_rate=0.05 --log_every_s=0
rm -f "$CMVN"
"$BIN/worker/asgd_worker" --servers="$SERVERS" --log_every=0 \
  --kaldi_data="$KALDI/train" --kaldi_alignments="$KALDI/train/pdf.ark" \
  --kaldi_heldout_data="$KALDI/heldout" \
  --kaldi_heldout_alignments="$KALDI/heldout/pdf.ark" \
  --kaldi_global_cmvn="$CMVN" --epochs="$EPOCHS" --save_model="$MODEL" \
  >"$WORKDIR/logs/worker.log" 2>&1 || { cat "$WORKDIR/logs/worker.log" >&2; exit 1; }
asgd_cleanup
grep "held-out frame accuracy" "$WORKDIR/logs/worker.log" | tail -1

"$BIN/kaldi/compute_priors" --alignments="$KALDI/train/pdf.ark" \
  --priors_out="$WORKDIR/prior.vec" >/dev/null
export OPENBLAS_NUM_THREADS=1
forward=("$BIN/worker/asgd_forward" --model="$MODEL" --kaldi_data="$KALDI/heldout"
         --kaldi_global_cmvn="$CMVN")
"${forward[@]}" --log_posteriors --out="$WORKDIR/logpost.ark" >/dev/null

{
  echo "# scripts/lazy_decode_experiment.sh, $(date -u +%F)"
  echo "# model: $HIDDEN DNN, $(grep "held-out frame accuracy" "$WORKDIR/logs/worker.log" | tail -1)"
  for beam in $BEAMS; do
    lists="$WORKDIR/active-$beam.txt"
    echo "beam $beam: $(scripts/beam_active_pdfs.py "$WORKDIR/logpost.ark" "$beam" "$lists")"
    "${forward[@]}" --priors="$WORKDIR/prior.vec" --active_pdfs="$lists" \
      --compare_full_layer --out="$WORKDIR/lazy-$beam.ark" | grep "lazy output:"
  done
} | tee "$OUT/lazy_decode.txt"
