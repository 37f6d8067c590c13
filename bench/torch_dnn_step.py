#!/usr/bin/env python3
"""PyTorch baseline for //bench:dnn_step_bench: the same model and step.

One step is what DnnBackend::ComputeGradient does: forward through the
feed-forward net (Linear + ReLU/sigmoid hidden layers, Linear output), mean
softmax cross-entropy, backward to every parameter's gradient. No optimizer.
It runs on CUDA with TF32 and/or FP32 matmuls and prints the same markdown
table and CSV lines as dnn_step_bench, so the two outputs can be pasted side
by side.

Two variants per math mode:
  torch-cuda         parameters, batch and gradients stay on the GPU (the
                     compute-only number);
  torch-cuda+copies  each step also copies the parameters and the batch from
                     pinned host memory to the GPU and the gradients back,
                     which is what the asgd CUDA backend must do per step
                     (its interface takes host spans).

    python3 bench/torch_dnn_step.py                  # seed model, batches 256,1024
    python3 bench/torch_dnn_step.py --hidden=512,512 --num_classes=40 --iters=50

FLOPs per step = 6 x batch x weights (weights = sum of out x in over layers,
biases not counted), as in dnn_step_bench. Needs a CUDA GPU and torch; it is
not run by the tests.
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input_dim", type=int, default=440)
    parser.add_argument("--hidden", default="2048,2048,2048,2048,2048")
    parser.add_argument("--num_classes", type=int, default=2000)
    parser.add_argument("--activation", choices=["relu", "sigmoid"],
                        default="relu")
    parser.add_argument("--batches", default="256,1024")
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
    if args.iters < 1 or args.warmup < 0:
        sys.exit("--iters must be >= 1 and --warmup >= 0")
    hidden = parse_list(args.hidden, "hidden") if args.hidden else []
    batches = parse_list(args.batches, "batches")
    maths = [m for m in args.math.split(",") if m]
    variants = [v for v in args.variants.split(",") if v]
    for m in maths:
        if m not in ("tf32", "fp32"):
            sys.exit(f"--math: unknown mode {m!r} (tf32 or fp32)")
    for v in variants:
        if v not in ("device", "copies"):
            sys.exit(f"--variants: unknown variant {v!r} (device or copies)")

    device = torch.device(args.device)
    sizes = [args.input_dim] + hidden + [args.num_classes]
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i + 1 < len(sizes) - 1:
            layers.append(torch.nn.ReLU() if args.activation == "relu"
                          else torch.nn.Sigmoid())
    model = torch.nn.Sequential(*layers).to(device)
    params = list(model.parameters())
    weights = sum(sizes[i] * sizes[i + 1] for i in range(len(sizes) - 1))
    num_params = sum(p.numel() for p in params)

    max_batch = max(batches)
    gen = torch.Generator().manual_seed(1)
    host_x = torch.randn(max_batch, args.input_dim, generator=gen).pin_memory()
    host_y = torch.randint(0, args.num_classes, (max_batch,),
                           generator=gen).pin_memory()
    # Host copies of the flat parameters and gradients, as the worker holds
    # them.
    host_params = [p.detach().cpu().pin_memory() for p in params]
    host_grads = [torch.empty_like(h).pin_memory() for h in host_params]

    dev_x = host_x.to(device)
    dev_y = host_y.to(device)

    def step(batch, copies):
        if copies:
            with torch.no_grad():
                for p, h in zip(params, host_params):
                    p.copy_(h, non_blocking=True)
            x = host_x[:batch].to(device, non_blocking=True)
            y = host_y[:batch].to(device, non_blocking=True)
        else:
            x, y = dev_x[:batch], dev_y[:batch]
        for p in params:
            p.grad = None
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if copies:
            for p, h in zip(params, host_grads):
                h.copy_(p.grad, non_blocking=True)
        torch.cuda.synchronize(device)  # synchronous, like ComputeGradient

    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name(device)}")
    print(f"# DNN step (forward + cross-entropy + backward): input "
          f"{args.input_dim}, hidden [{','.join(map(str, hidden))}], "
          f"{args.num_classes} classes, {args.activation}; {weights} weights, "
          f"{num_params} parameters")
    print(f"# FLOPs per step = 6 x batch x weights; {args.warmup} warm-up + "
          f"{args.iters} timed steps per row")

    rows = []
    for math in maths:
        torch.backends.cuda.matmul.allow_tf32 = math == "tf32"
        torch.backends.cudnn.allow_tf32 = math == "tf32"
        for variant in variants:
            copies = variant == "copies"
            backend = "torch-cuda+copies" if copies else "torch-cuda"
            for batch in batches:
                print(f"timing {backend} {math} batch {batch} ...",
                      file=sys.stderr, flush=True)
                for _ in range(args.warmup):
                    step(batch, copies)
                torch.cuda.synchronize(device)
                start = time.perf_counter()
                for _ in range(args.iters):
                    step(batch, copies)
                seconds = time.perf_counter() - start
                rows.append((backend, math, batch, args.iters, seconds))

    print()
    print("| backend | math | batch | minibatches/s | ms/step | TFLOP/s |")
    print("|---|---|---:|---:|---:|---:|")
    for backend, math, batch, iters, seconds in rows:
        per_s = iters / seconds
        print(f"| {backend} | {math} | {batch} | {per_s:.2f} | "
              f"{1e3 / per_s:.3f} | {6.0 * batch * weights * per_s / 1e12:.3f} |")
    print()
    print("csv,backend,math,batch,iters,seconds,minibatches_per_s,"
          "ms_per_step,tflops")
    for backend, math, batch, iters, seconds in rows:
        per_s = iters / seconds
        print(f"csv,{backend},{math},{batch},{iters},{seconds:.6f},"
              f"{per_s:.4f},{1e3 / per_s:.4f},"
              f"{6.0 * batch * weights * per_s / 1e12:.5f}")


if __name__ == "__main__":
    main()
