#!/bin/bash
# Smoke test of the make_corpus binary: flags, exit codes, a tiny corpus.
set -u
BIN="${TEST_SRCDIR}/${TEST_WORKSPACE}/corpus/make_corpus"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

"${BIN}" --help >"${TMP}/help.txt" 2>&1
grep -q -- "--num_train" "${TMP}/help.txt" || fail "--help does not list --num_train"

"${BIN}" 2>"${TMP}/noout.txt" && fail "no --out should fail"
grep -q "out is required" "${TMP}/noout.txt" || fail "no message for missing --out"

"${BIN}" --out="${TMP}/v" --voices=kal16,nosuchvoice 2>"${TMP}/voice.txt" &&
  fail "unknown voice should fail"
grep -q 'unknown voice "nosuchvoice"' "${TMP}/voice.txt" ||
  fail "no message for an unknown voice"

"${BIN}" --out=/proc/version/corpus --num_train=2 --num_heldout=1 \
  2>"${TMP}/unwritable.txt" && fail "unwritable --out should fail"
grep -q "error" "${TMP}/unwritable.txt" || fail "no message for unwritable --out"

"${BIN}" --out="${TMP}/tiny" --num_train=4 --num_heldout=2 --jobs=2 --nonoise \
  --voices=kal16,slt 2>"${TMP}/tiny.txt" || fail "tiny corpus failed: $(cat "${TMP}/tiny.txt")"
grep -q "done: 6 utterances (4 train, 2 held-out)" "${TMP}/tiny.txt" ||
  fail "no summary line: $(cat "${TMP}/tiny.txt")"
for f in corpus.txt train-00.bin train-01.bin heldout-00.bin heldout-01.txt; do
  [[ -s "${TMP}/tiny/${f}" || "${f}" == heldout-01.txt ]] || fail "missing ${f}"
done
grep -q "^heldout_files heldout-00.bin heldout-01.bin$" "${TMP}/tiny/corpus.txt" ||
  fail "corpus.txt does not list the held-out parts"

if [[ ${failures} -ne 0 ]]; then
  echo "${failures} check(s) failed" >&2
  exit 1
fi
echo "make_corpus_test: all checks passed"
