#!/bin/bash
# End-to-end check of the tools: make_corpus (tiny) -> corpus_to_kaldi ->
# compute_priors; the layout of the data directories, the counts against the
# number of frames, and the exit codes of bad invocations.
set -u
RUN="${TEST_SRCDIR}/${TEST_WORKSPACE}"
MAKE_CORPUS="${RUN}/corpus/make_corpus"
TO_KALDI="${RUN}/kaldi/corpus_to_kaldi"
PRIORS="${RUN}/kaldi/compute_priors"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

"${MAKE_CORPUS}" --out="${TMP}/corpus" --num_train=6 --num_heldout=3 --jobs=1 \
  --progress=false || { echo "FAIL: make_corpus"; exit 1; }

"${TO_KALDI}" --corpus="${TMP}/corpus" --out="${TMP}/kaldi" >"${TMP}/out.txt" 2>&1 ||
  fail "corpus_to_kaldi failed: $(cat "${TMP}/out.txt")"
grep -q "^train: 6 utterances" "${TMP}/out.txt" || fail "no train summary: $(cat "${TMP}/out.txt")"
grep -q "^heldout: 3 utterances" "${TMP}/out.txt" || fail "no heldout summary"
for split in train heldout; do
  for f in feats.ark feats.scp utt2spk spk2utt cmvn.ark cmvn.scp text pdf.ark; do
    [ -s "${TMP}/kaldi/${split}/${f}" ] || fail "${split}/${f} missing or empty"
  done
  # Every scp line is `key /absolute/feats.ark:OFFSET`, sorted by key.
  awk '$2 !~ /^\/.*feats\.ark:[0-9]+$/ {bad=1} END {exit bad}' \
    "${TMP}/kaldi/${split}/feats.scp" || fail "${split}/feats.scp: bad lines"
  sort -c "${TMP}/kaldi/${split}/feats.scp" || fail "${split}/feats.scp not sorted"
  cmp -s <(cut -d' ' -f1 "${TMP}/kaldi/${split}/feats.scp") \
    <(cut -d' ' -f1 "${TMP}/kaldi/${split}/utt2spk") ||
    fail "${split}: feats.scp and utt2spk keys differ"
  # utt2spk: the speaker is the key's prefix (Kaldi's sorting requirement).
  awk 'index($1, $2 "-") != 1 {bad=1} END {exit bad}' \
    "${TMP}/kaldi/${split}/utt2spk" || fail "${split}/utt2spk: speaker not a prefix"
done
[ "$(wc -l <"${TMP}/kaldi/classes.txt")" = 40 ] || fail "classes.txt is not 40 lines"
# Compressed by default: the archive starts with a key, then \0B and CM.
head -c 200 "${TMP}/kaldi/train/feats.ark" | grep -aq "CM" || fail "features not compressed"

"${TO_KALDI}" --corpus="${TMP}/corpus" --out="${TMP}/fm" --feature_format=fm \
  --gzip_alignments >/dev/null || fail "corpus_to_kaldi --feature_format=fm failed"
[ -s "${TMP}/fm/train/pdf.1.gz" ] || fail "no pdf.1.gz"
fm_size=$(stat -c %s "${TMP}/fm/train/feats.ark")
cm_size=$(stat -c %s "${TMP}/kaldi/train/feats.ark")
[ "${cm_size}" -lt "$((fm_size / 3))" ] || fail "compressed ${cm_size} not < 1/3 of FM ${fm_size}"

"${PRIORS}" --alignments="${TMP}/fm/train/pdf.*.gz" --counts_out="${TMP}/counts" \
  --priors_out="${TMP}/prior.vec" >"${TMP}/priors.txt" 2>&1 ||
  fail "compute_priors failed: $(cat "${TMP}/priors.txt")"
frames=$(sed -n 's/^train: [0-9]* utterances, \([0-9]*\) frames.*/\1/p' "${TMP}/out.txt")
sum=$(tr -d '[]' <"${TMP}/counts" | awk '{for (i = 1; i <= NF; i++) s += $i} END {print s}')
[ "${sum}" = "${frames}" ] || fail "counts sum to ${sum}, train has ${frames} frames"
grep -q "6 alignments, ${frames} frames" "${TMP}/priors.txt" || fail "compute_priors summary"
# Binary float vector: \0B FV \x04 <40> then 40 floats = 2 + 3 + 5 + 160 bytes.
[ "$(stat -c %s "${TMP}/prior.vec")" = 170 ] || fail "prior.vec is not a 40-dim FV"

"${TO_KALDI}" --corpus="${TMP}/corpus" --out="${TMP}/x" --feature_format=zip \
  2>/dev/null && fail "bad --feature_format accepted"
"${TO_KALDI}" --corpus="${TMP}/nothing" --out="${TMP}/y" 2>/dev/null &&
  fail "missing corpus accepted"
"${PRIORS}" --alignments="${TMP}/none.*" --counts_out="${TMP}/c2" 2>/dev/null &&
  fail "alignments matching nothing accepted"
"${PRIORS}" --alignments="${TMP}/fm/train/pdf.1.gz" --num_classes=3 \
  --counts_out="${TMP}/c3" 2>/dev/null && fail "labels beyond --num_classes accepted"

if [ "${failures}" -gt 0 ]; then
  echo "${failures} check(s) failed"
  exit 1
fi
echo "PASS"
