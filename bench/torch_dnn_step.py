#!/usr/bin/env python3
"""PyTorch baseline for //bench:dnn_step_bench: the same models and step.

One step is what ModelBackend::ComputeGradient does: forward through the
model, mean softmax cross-entropy, backward to every parameter's gradient. No
optimizer. It runs on CUDA with TF32 and/or FP32 matmuls and convolutions and
prints the same markdown table and CSV lines as dnn_step_bench, so the two
outputs can be pasted side by side.

Models (--models, comma-separated), with the same flags and defaults as
dnn_step_bench:
  dnn    Linear + ReLU/sigmoid/tanh hidden layers of --hidden on --input_dim
         inputs, Linear output;
  cnn    the --model=cnn preset: Conv2d(1, F, 3x8), act, MaxPool2d(1x3),
         Conv2d(F, 2F, 3x4), act, then --preset_hidden dense layers (auto:
         512), on (2 * context + 1) x feature_dim inputs (context -1: 5);
  lstm   the --model=lstm / blstm presets: torch.nn.LSTM with --lstm_layers
  blstm  layers of --lstm_cells cells, proj_size --lstm_projection, one or
         two directions, then --preset_hidden dense layers (auto: none), over
         --sequences sequences of --steps steps (time-major, as asgd).
         torch's LSTM has no cell clipping: --cell_clip is not applied (it
         changes no FLOP count), and it keeps two bias vectors per gate.

Two variants per math mode:
  torch-cuda         parameters, batch and gradients stay on the GPU (the
                     compute-only number);
  torch-cuda+copies  each step also copies the parameters and the batch from
                     pinned host memory to the GPU and the gradients back,
                     which is what the asgd CUDA backend must do per step
                     (its interface takes host spans).

    python3 bench/torch_dnn_step.py                  # seed DNN, batches 256,1024
    python3 bench/torch_dnn_step.py --models=dnn,cnn,lstm,blstm
    python3 bench/torch_dnn_step.py --hidden=512,512 --num_classes=40 --iters=50

FLOPs per step = 2 x TrainingMacsPerRow x rows, computed as in
model/model_spec.cc: 3 multiply-adds per weight (not bias) and row, and for a
conv layer 3 x filters x in_channels x kernel area per output position before
pooling. Needs a CUDA GPU and torch; it is not run by the tests.
"""

import argparse
import sys
import time


def parse_list(text, name):
    try:
        values = [int(v) for v in text.split(",") if v]
    except ValueError:
        sys.exit(f"--{name}: not a comma-separated list of integers: {text!r}")
    if any(v < 1 for v in values):
        sys.exit(f"--{name}: values must be positive: {text!r}")
    return values


def preset_hidden(args, kind):
    """The dense layers after a preset's conv or recurrent layers."""
    if args.preset_hidden == "auto":
        return [512] if kind == "cnn" else []
    return parse_list(args.preset_hidden, "preset_hidden")


def dense_head(nn, act, width, hidden, num_classes):
    """Dense layers of `hidden` widths on `width` inputs, then the output
    layer: (modules, multiply-adds per row of one forward pass)."""
    layers, macs = [], 0
    for h in hidden:
        layers += [nn.Linear(width, h), act()]
        macs += width * h
        width = h
    layers.append(nn.Linear(width, num_classes))
    return layers, macs + width * num_classes


def make_model(torch, kind, args):
    """(module, input_dim, training MACs per row, description, sequence)."""
    nn = torch.nn
    act = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh}[
        args.activation]
    if kind == "dnn":
        hidden = parse_list(args.hidden, "hidden") if args.hidden else []
        layers, macs = dense_head(nn, act, args.input_dim, hidden,
                                  args.num_classes)
        return (nn.Sequential(*layers), args.input_dim, 3 * macs,
                f"dnn {[args.input_dim] + hidden + [args.num_classes]}",
                False)

    hidden = preset_hidden(args, kind)
    if kind == "cnn":
        context = 5 if args.context < 0 else args.context
        frames, freq, f = 2 * context + 1, args.feature_dim, args.conv_filters
        t1, f1 = frames - 3 + 1, freq - 8 + 1  # conv 3x8
        p1t, p1f = t1 // 1, f1 // 3  # pool 1x3
        t2, f2 = p1t - 3 + 1, p1f - 4 + 1  # conv 3x4, pool 1x1
        if t2 < 1 or f2 < 1:
            sys.exit(f"cnn: {frames}x{freq} inputs are too small")
        macs = t1 * f1 * f * 1 * 3 * 8 + t2 * f2 * 2 * f * f * 3 * 4
        dense, dense_macs = dense_head(nn, act, 2 * f * t2 * f2, hidden,
                                       args.num_classes)
        macs += dense_macs
        body = nn.Sequential(
            nn.Unflatten(1, (1, frames, freq)),
            nn.Conv2d(1, f, (3, 8)), act(), nn.MaxPool2d((1, 3)),
            nn.Conv2d(f, 2 * f, (3, 4)), act(),
            nn.Flatten(), *dense)
        return (body, frames * freq, 3 * macs,
                f"cnn {frames}x{freq}, filters {f},{2 * f}, dense {hidden}",
                False)

    # lstm, blstm
    context = 0 if args.context < 0 else args.context
    in_dim = (2 * context + 1) * args.feature_dim
    dirs = 2 if kind == "blstm" else 1
    cells, proj = args.lstm_cells, args.lstm_projection
    rec = proj if proj > 0 else cells
    macs, width = 0, in_dim
    for _ in range(args.lstm_layers):
        macs += dirs * (4 * cells * width + 4 * cells * rec + proj * cells)
        width = dirs * rec
    dense, dense_macs = dense_head(nn, act, width, hidden, args.num_classes)
    macs += dense_macs

    class Recurrent(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(in_dim, cells, num_layers=args.lstm_layers,
                                proj_size=proj, bidirectional=dirs == 2)
            self.head = nn.Sequential(*dense)

        def forward(self, x):  # x: [steps, sequences, in_dim]
            y, _ = self.lstm(x)
            return self.head(y.reshape(-1, y.shape[-1]))

    return (Recurrent(), in_dim, 3 * macs,
            f"{kind} {args.lstm_layers} x {cells} cells, projection {proj}, "
            f"dense {hidden}", True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="dnn",
                        help="comma-separated: dnn, cnn, lstm, blstm")
    parser.add_argument("--input_dim", type=int, default=440)
    parser.add_argument("--hidden", default="2048,2048,2048,2048,2048")
    parser.add_argument("--num_classes", type=int, default=2000)
    parser.add_argument("--activation", choices=["relu", "sigmoid", "tanh"],
                        default="relu")
    parser.add_argument("--feature_dim", type=int, default=40)
    parser.add_argument("--context", type=int, default=-1)
    parser.add_argument("--conv_filters", type=int, default=128)
    parser.add_argument("--lstm_cells", type=int, default=512)
    parser.add_argument("--lstm_layers", type=int, default=3)
    parser.add_argument("--lstm_projection", type=int, default=256)
    parser.add_argument("--cell_clip", type=float, default=0.0,
                        help="accepted for dnn_step_bench parity; not applied")
    parser.add_argument("--preset_hidden", default="auto")
    parser.add_argument("--batches", default="256,1024",
                        help="dnn, cnn: rows per minibatch")
    parser.add_argument("--sequences", default="16,64",
                        help="lstm, blstm: sequences per minibatch")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--math", default="tf32,fp32",
                        help="comma-separated: tf32, fp32")
    parser.add_argument("--variants", default="device,copies",
                        help="comma-separated: device, copies")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()

    import torch  # imported late so that --help works without torch

    if not torch.cuda.is_available():
        sys.exit("torch_dnn_step: no CUDA device (torch.cuda.is_available() "
                 "is False)")
    if args.iters < 1 or args.warmup < 0 or args.steps < 1:
        sys.exit("--iters and --steps must be >= 1 and --warmup >= 0")
    kinds = [k for k in args.models.split(",") if k]
    for k in kinds:
        if k not in ("dnn", "cnn", "lstm", "blstm"):
            sys.exit(f"--models: unknown model {k!r} (dnn, cnn, lstm, blstm)")
    frame_batches = parse_list(args.batches, "batches")
    sequence_batches = parse_list(args.sequences, "sequences")
    maths = [m for m in args.math.split(",") if m]
    variants = [v for v in args.variants.split(",") if v]
    for m in maths:
        if m not in ("tf32", "fp32"):
            sys.exit(f"--math: unknown mode {m!r} (tf32 or fp32)")
    for v in variants:
        if v not in ("device", "copies"):
            sys.exit(f"--variants: unknown variant {v!r} (device or copies)")

    device = torch.device(args.device)
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name(device)}")
    print(f"# Training step (forward + cross-entropy + backward); FLOPs per "
          f"step = 2 x TrainingMacsPerRow x rows; {args.warmup} warm-up + "
          f"{args.iters} timed steps per row")

    rows = []
    for kind in kinds:
        model, in_dim, macs, text, sequence = make_model(torch, kind, args)
        model = model.to(device)
        params = list(model.parameters())
        num_params = sum(p.numel() for p in params)
        print(f"# {kind}: {text}, {args.num_classes} classes, "
              f"{args.activation}; {num_params} parameters, {macs} training "
              f"multiply-adds per row")
        steps = args.steps if sequence else 1
        counts = sequence_batches if sequence else frame_batches
        max_rows = max(counts) * steps
        gen = torch.Generator().manual_seed(1)
        host_x = torch.randn(max_rows, in_dim, generator=gen).pin_memory()
        host_y = torch.randint(0, args.num_classes, (max_rows,),
                               generator=gen).pin_memory()
        # Host copies of the parameters and gradients, as the worker holds
        # them.
        host_params = [p.detach().cpu().pin_memory() for p in params]
        host_grads = [torch.empty_like(h).pin_memory() for h in host_params]
        dev_x = host_x.to(device)
        dev_y = host_y.to(device)

        def step(count, copies):
            n = count * steps
            if copies:
                with torch.no_grad():
                    for p, h in zip(params, host_params):
                        p.copy_(h, non_blocking=True)
                x = host_x[:n].to(device, non_blocking=True)
                y = host_y[:n].to(device, non_blocking=True)
            else:
                x, y = dev_x[:n], dev_y[:n]
            if sequence:  # time-major rows: row t * count + b
                x = x.view(steps, count, in_dim)
            for p in params:
                p.grad = None
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            if copies:
                for p, h in zip(params, host_grads):
                    h.copy_(p.grad, non_blocking=True)
            torch.cuda.synchronize(device)  # synchronous, like ComputeGradient

        for math in maths:
            torch.backends.cuda.matmul.allow_tf32 = math == "tf32"
            torch.backends.cudnn.allow_tf32 = math == "tf32"
            for variant in variants:
                copies = variant == "copies"
                backend = "torch-cuda+copies" if copies else "torch-cuda"
                for count in counts:
                    print(f"timing {kind} {backend} {math} {count} x {steps} "
                          f"...", file=sys.stderr, flush=True)
                    for _ in range(args.warmup):
                        step(count, copies)
                    torch.cuda.synchronize(device)
                    start = time.perf_counter()
                    for _ in range(args.iters):
                        step(count, copies)
                    seconds = time.perf_counter() - start
                    rows.append((kind, backend, math, count, steps,
                                 args.iters, seconds, macs))

    def rate(iters, seconds):
        return iters / seconds

    print()
    print("| model | backend | math | sequences x steps | rows | "
          "minibatches/s | ms/step | TFLOP/s |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for kind, backend, math, count, steps, iters, seconds, macs in rows:
        per_s = rate(iters, seconds)
        n = count * steps
        print(f"| {kind} | {backend} | {math} | {count} x {steps} | {n} | "
              f"{per_s:.2f} | {1e3 / per_s:.3f} | "
              f"{2.0 * macs * n * per_s / 1e12:.3f} |")
    print()
    print("csv,model,backend,math,sequences,steps,rows,iters,seconds,"
          "minibatches_per_s,ms_per_step,tflops")
    for kind, backend, math, count, steps, iters, seconds, macs in rows:
        per_s = rate(iters, seconds)
        n = count * steps
        print(f"csv,{kind},{backend},{math},{count},{steps},{n},{iters},"
              f"{seconds:.6f},{per_s:.4f},{1e3 / per_s:.4f},"
              f"{2.0 * macs * n * per_s / 1e12:.5f}")


if __name__ == "__main__":
    main()
