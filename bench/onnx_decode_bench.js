// Decoding speed of asgd's exported models (asgd_export_onnx) in an
// independent runtime, onnxruntime (the CPU runtime bundled with the npm
// package onnxruntime-node): frames/s on one core (one intra-op thread,
// sequential execution, all graph optimizations), for comparison with
// asgd's own forward pass (asgd_eval / asgd_forward with one OpenBLAS
// thread). The input is --frames rows of the model's input width, fed in
// batches of --batch rows (asgd_eval's batch is 1024; for a recurrent model
// a batch is one utterance of that many frames); the values are a fixed
// pseudo-random pattern (a model's cost does not depend on them). The best of --rounds timed passes is printed per
// model, after one untimed pass.
//
//   NODE_PATH=tests/onnx/node_modules node bench/onnx_decode_bench.js \
//       [--frames=50000] [--batch=1024] [--rounds=3] [--threads=1] A.onnx B.onnx ...
//
// Prints one line per model: "MODEL frames_per_s N".
'use strict';
const ort = require('onnxruntime-node');

function parseArgs(argv) {
  const opts = { frames: 50000, batch: 1024, rounds: 3, threads: 1, models: [] };
  for (const a of argv) {
    const m = /^--(frames|batch|rounds|threads)=(\d+)$/.exec(a);
    if (m) {
      opts[m[1]] = Number(m[2]);
    } else if (a.startsWith('--')) {
      throw new Error(`unknown flag ${a} (want --frames, --batch, --rounds, --threads)`);
    } else {
      opts.models.push(a);
    }
  }
  if (opts.models.length === 0) throw new Error('give at least one .onnx file');
  for (const k of ['frames', 'batch', 'rounds', 'threads']) {
    if (!(opts[k] >= 1)) throw new Error(`--${k} must be >= 1`);
  }
  return opts;
}

async function framesPerSecond(file, opts) {
  const session = await ort.InferenceSession.create(file, {
    intraOpNumThreads: opts.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const meta = session.inputMetadata[0];
  const width = meta.shape[meta.shape.length - 1];
  if (meta.shape.length !== 2 || typeof width !== 'number') {
    throw new Error(`${file}: input ${JSON.stringify(meta.shape)} is not [frames, width] ` +
                    '(not an asgd_export_onnx model?)');
  }
  const batch = Math.min(opts.batch, opts.frames);
  const data = new Float32Array(batch * width);
  for (let i = 0; i < data.length; i++) data[i] = ((i * 7919) % 2001) / 1000 - 1;
  const feeds = { [session.inputNames[0]]: new ort.Tensor('float32', data, [batch, width]) };
  const passes = Math.ceil(opts.frames / batch);
  await session.run(feeds);  // warm-up
  let best = 0;
  for (let r = 0; r < opts.rounds; r++) {
    const t0 = process.hrtime.bigint();
    for (let p = 0; p < passes; p++) await session.run(feeds);
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    best = Math.max(best, (passes * batch) / s);
  }
  return best;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  for (const file of opts.models) {
    console.log(`${file} frames_per_s ${Math.round(await framesPerSecond(file, opts))}`);
  }
}

main().catch((e) => {
  console.error(`onnx_decode_bench: ${e.message}`);
  process.exit(1);
});
