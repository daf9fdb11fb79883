"""Cold analysis benchmark: the first `/runs` and `/findings` of every run of a logdir, in-process.

    python bench/bench_cold_analysis.py /path/to/logdir                       # this checkout
    python bench/bench_cold_analysis.py /path/to/logdir --code /path/to/old   # and another, side by side
    python bench/bench_cold_analysis.py /path/to/logdir --write-only          # only write the ResNet-101 logdir

Prints figures; it is not a test and asserts nothing about time. See bench/README.md.

Each checkout is measured in its own process (``PYTHONPATH`` set to it), on
TensorBoard's Python loader with its default sampling (``EventMultiplexer``
beside ``MultiplexerDataProvider``, as the tests' ``PluginClient`` builds them),
the routes called through a werkzeug test client. Loading the event files is
done once and not counted. *cold* is ``/runs`` then ``/findings`` of each run on
a new plugin instance, whose caches are empty (median of ``--repeats`` new
instances); *findings* is the CPU time of the detectors together and of the
slowest ones, summed over the runs. CPU times are given beside wall times: on a
shared machine wall times move with the other jobs, CPU times much less.

``--write`` (or ``--write-only``) first writes the logdir the README's figures are of (`write_logdir`):
two ResNet-101-style runs of gradhealth summaries, every step of the first 30 and every 10th after,
over 3,000 steps, with the loss and learning rate at every step.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

STEPS = 3000
LOGGED = list(range(30)) + list(range(30, STEPS, 10))
MOMENTUM, WEIGHT_DECAY = 0.9, 1e-4
SAMPLE = 1024  # values a tensor's statistics are computed from; its count and L2 norm are scaled to its size


def resnet101_params() -> list:
    """(name, shape) of torchvision's ResNet-101 parameters in model order: 314 tensors. A block's
    `downsample` is an `nn.Sequential` of a 1x1 conv and a BatchNorm: `downsample.1.weight` is a norm scale."""
    out = [("conv1.weight", (64, 3, 7, 7)), ("bn1.weight", (64,)), ("bn1.bias", (64,))]
    inplanes = 64
    for li, (planes, blocks) in enumerate(zip((64, 128, 256, 512), (3, 4, 23, 3)), 1):
        for b in range(blocks):
            p = f"layer{li}.{b}."
            for conv, shape in (("1", (planes, inplanes, 1, 1)), ("2", (planes, planes, 3, 3)),
                                ("3", (4 * planes, planes, 1, 1))):
                out += [(f"{p}conv{conv}.weight", shape), (f"{p}bn{conv}.weight", shape[:1]),
                        (f"{p}bn{conv}.bias", shape[:1])]
            if b == 0:
                out += [(p + "downsample.0.weight", (4 * planes, inplanes, 1, 1)),
                        (p + "downsample.1.weight", (4 * planes,)), (p + "downsample.1.bias", (4 * planes,))]
            inplanes = 4 * planes
    return out + [("fc.weight", (1000, 2048)), ("fc.bias", (1000,))]


def write_run(run_dir: str, lr_at, noise: float, seed: int) -> None:
    """One run of SGD with momentum and weight decay, simulated per tensor from its norm.

    Kernels start at torchvision's init (He, fan-out; the classifier uniform), norm scales at 1 and
    biases at 0, as torchvision's are. A conv kernel followed by BatchNorm is scale-invariant, so its
    gradient norm is c / |w|: c puts its init at the balance of the updates' growth and the weight decay
    at the first rate, so its norm grows early (gradients 4x larger in the first few hundred steps) and
    after a rise of the rate (to the new balance, about rate^(1/4)). Each update is momentum-amplified
    rate x gradient, the logged update ratio its norm over the weight's. `noise` is the log-std of a
    gradient's size from batch to batch.
    """
    import numpy as np

    from gradhealth_plugin.writing import format as fmt
    from gradhealth_plugin.writing import reference
    from gradhealth_plugin.writing.events import SummaryFileWriter

    rng = np.random.default_rng(seed)
    params = resnet101_params()
    n = np.array([float(np.prod(shape)) for _, shape in params])
    conv = np.array([len(shape) == 4 for _, shape in params])
    fc = np.array([name == "fc.weight" for name, _ in params])
    kernel = conv | fc
    scale = np.array([len(shape) == 1 and name.endswith("weight") for name, shape in params])
    fan_out = np.array([shape[0] * int(np.prod(shape[2:])) for _, shape in params])
    std0 = np.where(conv, np.sqrt(2.0 / fan_out), np.where(fc, 1 / np.sqrt(3 * 2048), 0.0))
    norm2 = std0 ** 2 * n  # squared norms of the kernels
    c = norm2 * np.sqrt(2 * WEIGHT_DECAY * (1 - MOMENTUM) / lr_at(0))
    base_g = rng.standard_t(4, size=(len(params), SAMPLE)) / np.sqrt(2.0)
    base_w = rng.standard_normal((len(params), SAMPLE))
    spread = np.zeros(len(params))  # per-value std of the norm scales and biases, 0 at init
    at = {name: i for i, name in enumerate(fmt.FIELDS)}
    logged = set(LOGGED)
    writer = SummaryFileWriter(run_dir)
    for t in range(STEPS):
        lr = lr_at(t)
        step_size = lr / (1 - MOMENTUM)
        early = 1 + 3 * np.exp(-t / 150)
        batch = np.exp(noise * rng.standard_normal(len(params)))
        grad = np.where(conv, c / np.sqrt(np.maximum(norm2, 1e-30)), np.where(fc, 0.5, 2e-3 * np.sqrt(n)))
        grad = grad * early * batch
        update = step_size * grad
        rose = t >= STEPS // 2 and lr > lr_at(STEPS // 2 - 1)
        loss = 2.0 + 4.9 * np.exp(-t / 500) + (0.6 * np.exp(-(t - STEPS // 2) / 80) if rose else 0.0)
        writer.write_scalar(t, "train/loss", loss * np.exp(0.05 * rng.standard_normal()))
        writer.write_scalar(t, "train/lr", lr)
        if t in logged:
            for i, (name, shape) in enumerate(params):
                if kernel[i]:
                    w, norm = base_w[i] * np.sqrt(norm2[i] / n[i]), np.sqrt(norm2[i])
                else:
                    w = (1.0 if scale[i] else 0.0) + base_w[i] * spread[i]
                    norm = np.sqrt(n[i] * np.mean(w ** 2))
                for role, values in (("gradient", base_g[i] * grad[i] / np.sqrt(n[i])), ("weight", w)):
                    v = reference.stats_numpy(values)
                    v[at["count"]], v[at["l2"]] = n[i], v[at["l2"]] * np.sqrt(n[i] / SAMPLE)
                    if role == "weight":
                        v[at["update_ratio"]] = update[i] / norm if norm > 0 else np.nan
                    writer.write_stats(t, role, name, v, position=i, shape=shape, wall_time=1.7e9 + t + i * 1e-4)
        norm2 = np.where(kernel, norm2 * (1 - 2 * step_size * WEIGHT_DECAY) + update ** 2, norm2)
        spread = np.where(kernel, 0.0, np.sqrt(spread ** 2 * (1 - 2 * step_size * WEIGHT_DECAY) + update ** 2 / n))
    writer.close()


def write_logdir(root: str) -> None:
    """`resnet101_lrjump`: rate 0.01, 10x at step 1,500; `resnet101_noise_lr20`: rate 0.2 (20x), gradient
    sizes swinging about 10x between batches. A run already written is left as it is."""
    for name, lr_at, noise, seed in (("resnet101_lrjump", lambda t: 0.01 if t < STEPS // 2 else 0.1, 0.15, 1),
                                     ("resnet101_noise_lr20", lambda t: 0.2, 1.0, 2)):
        run_dir = os.path.join(root, name)
        if not os.path.isdir(run_dir):
            write_run(run_dir, lr_at, noise, seed)


def _measure(logdir: str, repeats: int) -> dict:
    """Times the routes of the gradhealth importable in this process (see the module docstring)."""
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from werkzeug import test as werkzeug_test
    from werkzeug import wrappers

    from gradhealth_plugin import plugin
    from gradhealth_plugin.analysis import detectors

    t0 = time.perf_counter()
    multiplexer = plugin_event_multiplexer.EventMultiplexer(tensor_size_guidance={})
    multiplexer.AddRunsFromDirectory(logdir)
    multiplexer.Reload()
    dp = data_provider.MultiplexerDataProvider(multiplexer, logdir)
    load = time.perf_counter() - t0

    # CPU seconds of each detector, through its module's `detect` (the registry calls it by module).
    spent = defaultdict(float)
    for module in detectors.DETECTORS:
        def timed(rd, limits, _detect=module.detect, _kind=module.KIND):
            cpu = time.process_time()
            try:
                return _detect(rd, limits)
            finally:
                spent[_kind] += time.process_time() - cpu
        module.detect = timed

    def cold() -> tuple:
        context = base_plugin.TBContext(logdir=logdir, data_provider=dp, multiplexer=multiplexer)
        apps = plugin.GradHealthPlugin(context).get_plugin_apps()

        def get(route, **params):
            response = werkzeug_test.Client(apps[route], wrappers.Response).get(route, query_string=params)
            assert response.status_code == 200, (route, response.get_data(as_text=True)[:300])
            return json.loads(response.get_data(as_text=True))

        spent.clear()
        t, cpu = time.perf_counter(), time.process_time()
        runs = [r["run"] for r in get("/runs")["runs"]]
        runs_wall, runs_cpu = time.perf_counter() - t, time.process_time() - cpu
        for run in runs:
            get("/findings", run=run)
        return runs_wall, runs_cpu, time.perf_counter() - t, time.process_time() - cpu, dict(spent)

    results = [cold() for _ in range(repeats)]
    kinds = sorted(results[0][4], key=lambda k: -results[0][4][k])
    med = lambda i: statistics.median(r[i] for r in results)  # noqa: E731
    return {"load": load, "runs": med(0), "runs_cpu": med(1), "all": med(2), "all_cpu": med(3),
            "detectors_cpu": statistics.median(sum(r[4].values()) for r in results),
            "each": [f"{r[0]:.2f} ({r[1]:.2f})" for r in results],
            "by_kind": {k: statistics.median(r[4].get(k, 0.0) for r in results) for k in kinds}}


def _run_checkout(code: str, logdir: str, repeats: int) -> dict:
    env = dict(os.environ, PYTHONPATH=code, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, __file__, "_measure", logdir, str(repeats)], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"measuring {code} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logdir")
    parser.add_argument("--repeats", type=int, default=3, help="new plugin instances timed per checkout (median)")
    parser.add_argument("--code", action="append", default=[],
                        help="another checkout of gradhealth to time on the same logdir (repeatable)")
    parser.add_argument("--top", type=int, default=3, help="detectors listed one by one, slowest first")
    parser.add_argument("--write", action="store_true", help="first write the ResNet-101 logdir (write_logdir)")
    parser.add_argument("--write-only", action="store_true", help="only write the ResNet-101 logdir")
    args = parser.parse_args(argv)
    if args.write or args.write_only:
        sys.path.insert(0, REPO)
        write_logdir(args.logdir)
        if args.write_only:
            return 0
    results = [(code, _run_checkout(code, args.logdir, args.repeats)) for code in args.code + [REPO]]
    print(f"\n{args.logdir}, Python loader, in-process (seconds, wall (CPU); median of {args.repeats} "
          "new plugin instances)\n")
    print("| checkout | load (not counted) | cold /runs | each | cold /runs + every /findings | detectors, CPU "
          "| slowest detectors, CPU |")
    print("| --- | ---: | ---: | --- | ---: | ---: | --- |")
    for code, r in results:
        top = ", ".join(f"{k} {v:.2f}" for k, v in list(r["by_kind"].items())[:args.top])
        print(f"| {code} | {r['load']:.1f} | {r['runs']:.2f} ({r['runs_cpu']:.2f}) | {', '.join(r['each'])} | {r['all']:.2f} "
              f"({r['all_cpu']:.2f}) | {r['detectors_cpu']:.2f} | {top} |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_measure":
        print(json.dumps(_measure(sys.argv[2], int(sys.argv[3]))))
        sys.exit(0)
    sys.exit(main())
