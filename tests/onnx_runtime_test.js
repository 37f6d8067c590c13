// asgd's ONNX export run in an independent runtime: onnxruntime (the CPU
// runtime bundled with the npm package onnxruntime-node). For each model kind
// written by tests/onnx_reference_main.cc (DNN, CNN, LSTM and BLSTM, the
// recurrent ones with a projection and cell clipping, and a multi-frame DNN
// whose rows hold 3 heads' log-posteriors), the runtime's
// log-posteriors of one utterance must equal asgd's own within TOLERANCE
// (absolute, in nats). Prints the largest difference per kind and overall.
//
// Usage: node onnx_runtime_test.js DIR   (NODE_PATH: tests/onnx/node_modules)
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

// asgd's CPU backend evaluates exp, sigmoid and tanh with its own
// polynomial (about 2 ulp; tanh to about 1e-7 absolute), onnxruntime with
// its own, and the GEMMs sum in other orders: the two differ by about 1e-6
// here (measured: at most 1.2e-6, an LSTM over 150 steps), ten times less
// than this.
const TOLERANCE = 1e-5;

function readFloats(file) {
  const b = fs.readFileSync(file);
  return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
}

async function main() {
  const dir = process.argv[2];
  const manifest = fs.readFileSync(path.join(dir, 'manifest.txt'), 'utf8')
    .trim().split('\n').map((line) => line.split(' '));
  if (manifest.length !== 5) throw new Error(`want 5 models, got ${manifest.length}`);
  let worst = 0;
  let failed = 0;
  for (const [kind, framesText, inputDimText, classesText] of manifest) {
    const frames = Number(framesText);
    const inputDim = Number(inputDimText);
    const classes = Number(classesText);
    const session = await ort.InferenceSession.create(path.join(dir, `${kind}.onnx`));
    const input = readFloats(path.join(dir, `${kind}.input.f32`));
    const expected = readFloats(path.join(dir, `${kind}.expected.f32`));
    const feeds = { input: new ort.Tensor('float32', input, [frames, inputDim]) };
    const result = await session.run(feeds);
    const out = result.log_posteriors;
    const dims = out.dims.join('x');
    if (dims !== `${frames}x${classes}`) {
      console.log(`FAIL ${kind}: output of ${dims}, want ${frames}x${classes}`);
      failed++;
      continue;
    }
    let largest = 0;
    let at = 0;
    for (let i = 0; i < expected.length; i++) {
      const d = Math.abs(out.data[i] - expected[i]);
      if (!(d <= largest)) {  // NaN counts as the largest
        largest = d;
        at = i;
      }
    }
    worst = Math.max(worst, largest);
    const row = Math.floor(at / classes);
    const ok = largest <= TOLERANCE;
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${kind}: ${frames} frames x ${classes} classes, ` +
                `largest |onnxruntime - asgd| = ${largest.toExponential(3)} ` +
                `(frame ${row}, class ${at % classes})`);
    if (!ok) failed++;
  }
  console.log(`largest log-posterior difference over all models: ${worst.toExponential(3)} ` +
              `(tolerance ${TOLERANCE}); onnxruntime-node ${require('onnxruntime-node/package.json').version}`);
  if (failed > 0) process.exit(1);
}

main().catch((e) => {
  console.log(`FAIL: ${e.stack || e}`);
  process.exit(1);
});
