"""A roofline of the hot paths: work done (counted from the shapes), time, and the fraction of the machine's peak.

The peaks are measured here, not taken from a datasheet:

- **float32 matmul peak**: ``torch.mm`` of square float32 matrices (sizes 512, 1,024, 2,048), best
  of ``--repeats``, with torch's default thread count and with one thread (the recourse searches
  run in one thread: :func:`~recourse_privacy.models.torch_utils.torch_threads`);
- **memory bandwidth**: a copy of a 256 MiB float32 tensor into another (bytes read + written),
  best of ``--repeats``.

Each path is timed once after a warm-up on a few rows, on the table-2 HELOC MLP of Pawelczyk et al. (2023) (one
hidden layer of 1,000 ReLU, 3,000 members; trained once and kept with
``benchmarks/bench_recourse_speed.py``'s ``prepare``). Work is counted from the shapes and the
iteration counts the methods report (``RecourseResult.n_iter``), with the formula beside each path
in :data:`FORMULAS`; ``F(d) = 2 (d w + w)`` is one forward pass of the MLP (w = 1,000 hidden
units). Rates are per CPU second of this process (``time.process_time``, all its threads): on a
shared machine the wall time also counts other processes' turns, the CPU time does not. FLOP-counted
paths are compared with one core's matmul peak (also per CPU second), byte-counted ones (the
attacks' scoring) with the copy bandwidth. On a GPU (``--device cuda``) the clocks are wall times
after ``torch.cuda.synchronize``; the searches of Growing Spheres, C-CHVAE and FACE run on the CPU
whatever the device (numpy and one-thread torch), SCFE, REVISE and the batched training on it.

    python benchmarks/roofline.py [--device cpu|cuda|auto] [--n-points 300] [--repeats 5]
        [--out benchmarks/results/roofline]   # writes roofline.csv and roofline.md

A service request is not timed here: it is a JSON/HTTP round trip around one of the paths above
(``benchmarks/bench_serve.py`` times it end to end).
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import os
import pickle
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

#: how each path's work is counted (n: rows, s: samples per shell, K: shells searched, w: hidden units,
#: d: features, q: the VAE decoder's hidden units, k: its latent size, T: targets, R: reference models)
FORMULAS = {
    "scfe": "sum over rows of (n_iter + 1) x 2 F(d): a forward and an input-gradient backward per Adam step",
    "gs": "sum over rows of K x (s x 4w + 2 d w) + shells x 2 s d w: shifted logits (add, ReLU, dot) per candidate; "
    "with the folded screen (one hidden layer) its calls counted instead: per row and shell 2 s w (the stable "
    "units' product) + 4 s u (add, ReLU, multiply, add over the u units it computes elementwise: the unstable "
    "ones padded to 16, or all w in a dense row) + 2 d w, plus 2 s d w per shell",
    "cchvae": "sum over rows of K x s x (2 k q + 2 q d + F(d)) (plain path, q >= d) or K x s x (2 q w + 4 w) (screened)",
    "revise": "sum over rows of (n_iter + 1) x 2 (2 k q + 2 q d + F(d)): decoder and MLP, forward and backward",
    "face-graph": "2 n^2 d (the KDE's Gram matrix over the n nodes) + 4 E n (each of the E edge midpoints' log-sum-exp over the nodes, one exp each)",
    "privrecourse-fit": "time only: DP k-means (K = 500) and a graph search, branchy; no FLOP count",
    "batched-training": "R x epochs x rows x 3 F(d): forward, weight and input gradients of every stacked MLP",
    "online-lrt": "bytes of the reference matrix (T x R float64) and its two masks, read once",
    "rmia": "bytes of p_x, pr_x (T) and p_z, pr_z (Z) float64, read once, plus the sort of Z ratios",
}


@dataclass(frozen=True)
class Peaks:
    """The machine's measured peaks."""

    gflops: float  #: float32 matmul, default threads
    gflops_1t: float  #: float32 matmul, one thread
    gbps: float  #: copy bandwidth (read + write), GB/s
    threads: int
    device: str


@dataclass(frozen=True)
class Row:
    """One path's work, time and fraction of the peak that bounds it."""

    path: str
    work: float  #: FLOPs or bytes
    unit: str  #: "FLOP" or "byte"
    seconds: float  #: wall time
    cpu_seconds: float  #: CPU time of this process (all its threads); the wall time on a GPU
    threads: int  #: torch threads the path ran with
    note: str = ""

    def rate(self) -> float:
        """Work per CPU second (per core busy): on a shared machine, wall time counts other processes' turns."""
        return self.work / self.cpu_seconds / 1e9 if self.cpu_seconds > 0 else float("nan")

    def fraction(self, peaks: Peaks) -> float:
        """Fraction of one busy core's peak (matmul for FLOPs, copy bandwidth for bytes); NaN where no work is counted."""
        if not self.work:
            return float("nan")
        if self.unit == "byte":
            return self.rate() / peaks.gbps
        return self.rate() / peaks.gflops_1t


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _clock(device: str) -> Callable[[], float]:
    """CPU time of this process on the CPU (robust to other processes' load), wall time on a GPU."""
    return time.perf_counter if device.startswith("cuda") else time.process_time


def _best(fn: Callable[[], object], repeats: int, device: str) -> float:
    fn()
    _sync(device)
    clock, best = _clock(device), float("inf")
    for _ in range(repeats):
        t = clock()
        fn()
        _sync(device)
        best = min(best, clock() - t)
    return best


def measure_peaks(device: str, repeats: int) -> Peaks:
    """The float32 matmul peak (default threads and one thread) and the copy bandwidth on ``device``."""
    import torch

    from recourse_privacy.models.torch_utils import torch_threads

    def matmul_peak() -> float:
        best = 0.0
        for n in (512, 1024, 2048):
            a = torch.randn(n, n, device=device)
            b = torch.randn(n, n, device=device)
            best = max(best, 2 * n**3 / _best(lambda a=a, b=b: a @ b, repeats, device) / 1e9)
        return best

    gflops = matmul_peak()
    with torch_threads(1):
        gflops_1t = matmul_peak() if device == "cpu" else gflops
    src = torch.ones(64 << 20, device=device)  # 256 MiB of float32
    dst = torch.empty_like(src)
    gbps = 2 * src.numel() * 4 / _best(lambda: dst.copy_(src), repeats, device) / 1e9
    return Peaks(gflops, gflops_1t, gbps, torch.get_num_threads(), device)


def _prepare(dataset: str, model_dir: Path, seed: int) -> dict:
    spec = importlib.util.spec_from_file_location("bench_recourse_speed", ROOT / "benchmarks/bench_recourse_speed.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with open(mod.prepare(dataset, model_dir, seed), "rb") as f:
        return pickle.load(f)


def _mlp_flops(model, d: int) -> float:
    """F(d): one forward pass of the (Linear, ReLU, ..., Linear) MLP, 2 x fan_in x fan_out per layer."""
    widths = [d, *model.hidden_layers, 1]
    return float(sum(2 * a * b for a, b in zip(widths[:-1], widths[1:])))


def _shells(n_iter: np.ndarray, max_iter: int) -> np.ndarray:
    """Shells each row was scored in: its (1-based) shell, or every shell where none was found."""
    return np.where(n_iter > 0, n_iter, np.where(n_iter < 0, max_iter, 0))


#: rows of a warm-up run before each timed path (torch's first calls load kernels and allocate)
WARM = 5


def timed(fn: Callable[[], object], device: str) -> tuple[object, float, float]:
    """``fn()`` once, after its path's warm-up (searches are too slow to repeat under load): (result, wall, CPU seconds)."""
    _sync(device)
    clock = _clock(device)
    t, c = time.perf_counter(), clock()
    out = fn()
    _sync(device)
    return out, time.perf_counter() - t, clock() - c


@contextmanager
def _folded_work():
    """Within the block, count the FLOPs of ``torch_utils.folded_hidden_logits`` (GS's folded screen) into a list.

    Yields ``[flops, share]`` (empty when the screen never ran, e.g. in sources without it):
    per call ``2 n s w`` for the stable units' product and ``4 s`` per unit computed elementwise
    (each row's unstable units padded to ``UNIT_QUANTUM``, or all ``w`` units in a row with at least
    ``GATHER_SHARE`` of them unstable), and the share of (row, unit) pairs computed elementwise.
    """
    import torch

    from recourse_privacy.models import torch_utils

    folded = getattr(torch_utils, "folded_hidden_logits", None)
    quantum = getattr(torch_utils, "UNIT_QUANTUM", 1)
    found: list[float] = []
    if folded is None:
        yield found
        return
    totals = [0.0, 0.0, 0.0]  # flops, elementwise (row, unit) pairs, all pairs

    def counting(A, Bt, w, b):
        n, h = A.shape
        s = Bt.shape[1]
        counts = ((A < -Bt.amin(1)) & (A > -Bt.amax(1))).sum(1)
        dense = counts >= torch_utils.GATHER_SHARE * h
        units = float(torch.where(dense, h, (counts + quantum - 1) // quantum * quantum).sum())
        totals[0] += 2.0 * n * s * h + 4.0 * s * units
        totals[1] += units
        totals[2] += n * h
        return folded(A, Bt, w, b)

    torch_utils.folded_hidden_logits = counting
    try:
        yield found
    finally:
        torch_utils.folded_hidden_logits = folded
    if totals[2]:
        found += [totals[0], totals[1] / totals[2]]


def bench_recourse(data: dict, n_points: int, device: str) -> list[Row]:
    """SCFE, Growing Spheres, C-CHVAE, REVISE and FACE's graph build on the HELOC MLP."""
    import torch

    from recourse_privacy import recourse
    from recourse_privacy.recourse import growing_spheres
    from recourse_privacy.recourse import scfe as scfe_module
    from recourse_privacy.recourse.cchvae import _decoded_screen

    model, Xq = data["model"], data["X_query"]
    X = Xq[model.predict(Xq) == 0][:n_points]
    n, d = X.shape
    F = _mlp_flops(model, d)
    w = int(sum(model.hidden_layers))
    threads = torch.get_num_threads()
    rows = []

    scfe = recourse.SCFE()
    scfe.generate(model, X[:WARM])  # warm-up: torch's first calls (kernels, allocators) are not the path's work
    res, secs, cpu = timed(lambda: scfe.generate(model, X), device)
    steps = np.where(res.n_iter >= 0, res.n_iter, scfe.max_iter * scfe.max_rounds) + 1
    one = getattr(scfe_module, "ONE_THREAD_ELEMENTS", 0) >= n * w  # sources without it: torch's threads
    note = f"{n} rows, validity {res.validity:.2f}, median steps {np.median(steps):.0f}, max {steps.max()}"
    rows.append(Row("scfe", float(steps.sum()) * 2 * F, "FLOP", secs, cpu, 1 if one else threads, note))

    # the shell searches split their rows among torch's threads (sources before that: one thread)
    split_rows = getattr(growing_spheres, "SPLIT_ROWS", None)
    split = 1 if split_rows is None else max(1, min(threads, n // split_rows))
    gs = recourse.fit_for(recourse.GrowingSpheres(random_state=0), data["X_train"], data["y_train"], model)
    gs.generate(model, X[:WARM])
    with _folded_work() as folded:
        res, secs, cpu = timed(lambda: gs.generate(model, X), device)
    K = _shells(res.n_iter, gs.max_iter)
    s = gs.n_search_samples
    if folded:  # the folded screen ran: its own work, counted per call
        work = folded[0] + float(K.sum()) * 2 * d * w + K.max() * 2 * s * d * w
        note = f"{n} rows, mean shells {K.mean():.1f}, folded screen: {folded[1]:.0%} of units computed elementwise"
    else:
        work = float(K.sum()) * (s * 4 * w + 2 * d * w) + K.max() * 2 * s * d * w
        note = f"{n} rows, mean shells {K.mean():.1f}"
    rows.append(Row("gs", work, "FLOP", secs, cpu, split, note))

    cc = recourse.fit_for(recourse.CCHVAE(random_state=0), data["X_train"], data["y_train"], model)
    vae = cc.vae_
    q, k = vae.hidden_layers[-1], vae.latent_dim
    cc.generate(model, X[:WARM])
    screened = _decoded_screen(model, vae, vae.encode(X[:1])) is not None
    res, secs, cpu = timed(lambda: cc.generate(model, X), device)
    K = _shells(res.n_iter, cc.max_iter)
    skipped = res.info.get("shells_skipped", np.zeros_like(K))  # shells a floor proved empty: no candidate scored
    per = (2 * q * w + 4 * w) if screened else (2 * k * q + 2 * q * d + F)
    note = (f"{n} rows, mean shells {K.mean():.1f} ({skipped.sum() / K.sum():.0%} proven empty, skipped), "
            f"{'screened' if screened else 'plain'} path")  # fmt: skip
    rows.append(Row("cchvae", float((K - skipped).sum()) * cc.n_search_samples * per, "FLOP", secs, cpu, split, note))

    rv = recourse.fit_for(recourse.REVISE(random_state=0), data["X_train"], data["y_train"], model)
    rv.generate(model, X[:WARM])
    res, secs, cpu = timed(lambda: rv.generate(model, X), device)
    steps = np.where(res.n_iter >= 0, res.n_iter, rv.max_iter) + 1
    work = float(steps.sum()) * 2 * (2 * k * q + 2 * q * d + F)
    rows.append(Row("revise", work, "FLOP", secs, cpu, 1, f"{n} rows, mean steps {steps.mean():.1f}"))

    Xn = data["X_train"]
    face = recourse.FACE()
    recourse.FACE().fit(Xn[:300])
    fitted, secs, cpu = timed(lambda: face.fit(Xn), device)
    E = fitted.graph_.nnz
    work = 2.0 * len(Xn) ** 2 * d + 4.0 * E * len(Xn)
    rows.append(Row("face-graph", work, "FLOP", secs, cpu, threads, f"{len(Xn)} nodes, {E} directed edges"))
    return rows


def bench_privrecourse(device: str) -> list[Row]:
    """PrivRecourse's publication (DP k-means, graph) on paper 003's Adult setting: time only."""
    from recourse_privacy.models.dp import DPLogisticModel
    from recourse_privacy.recourse import make_recourse

    try:  # where the split moved to its own module (pentyala2023_setup.load_split, a typed result)
        from recourse_privacy.reproductions.pentyala2023_setup import load_split

        sp = load_split("adult", None, 0)
        Xtr, ytr, Xg, yg, Xte = sp.X_train, sp.y_train, sp.X_graph, sp.y_graph, sp.X_test
    except ImportError:  # the sources of 4268b18
        from recourse_privacy.reproductions.pentyala2023 import _split

        Xtr, ytr, Xg, yg, Xte, _ = _split("adult", None, 0)
    model = DPLogisticModel(epsilon=1.0, data_norm=float(np.sqrt(5)), random_state=0).fit(Xtr, ytr)
    method = make_recourse("privrecourse", random_state=0)
    _, secs, cpu = timed(lambda: method.fit(Xg, yg, model), device)
    Q = Xte[model.predict(Xte) == 0][:1000]
    _, gen, gen_cpu = timed(lambda: method.generate(model, Q), device)
    return [
        Row("privrecourse-fit", 0.0, "FLOP", secs, cpu, 1, f"{len(Xg)} graph points, K = 500"),
        Row("privrecourse-paths", 0.0, "FLOP", gen, gen_cpu, 1, f"{len(Q)} queries: graph search, branchy"),
    ]


def bench_training(data: dict, device: str, n_models: int, epochs: int) -> list[Row]:
    """Batched reference training (``fit_mlps_batched``): ``n_models`` MLPs on halves of the HELOC members."""
    import torch

    from recourse_privacy.models import make_model
    from recourse_privacy.models.batched import fit_mlps_batched

    X, y = data["X_train"], data["y_train"]
    rng = np.random.default_rng(0)
    rows = [rng.choice(len(X), len(X) // 2, replace=False) for _ in range(n_models)]
    models = [make_model("mlp", random_state=k, epochs=epochs, lr=1e-3) for k in range(n_models)]
    warm = [make_model("mlp", random_state=k, epochs=1, lr=1e-3) for k in range(2)]
    fit_mlps_batched(warm, X, y, [r[:128] for r in rows[:2]], device=device)
    _, secs, cpu = timed(lambda: fit_mlps_batched(models, X, y, rows, device=device), device)
    work = n_models * epochs * (len(X) // 2) * 3 * _mlp_flops(models[0], X.shape[1])
    return [
        Row(
            "batched-training",
            work,
            "FLOP",
            secs,
            cpu,
            torch.get_num_threads(),
            f"{n_models} MLPs x {epochs} epochs x {len(X) // 2} rows",
        )
    ]


def bench_scoring(n_targets: int, n_refs: int, n_pop: int) -> list[Row]:
    """The online LRT's and RMIA's scoring on synthetic reference statistics (shapes of a 64-reference audit)."""
    from recourse_privacy.attacks.online import online_lr
    from recourse_privacy.attacks.rmia import rmia_scores

    rng = np.random.default_rng(0)
    ref = rng.gamma(2.0, 1.0, (n_targets, n_refs))
    keep = rng.random((n_targets, n_refs)) < 0.5
    usable = rng.random((n_targets, n_refs)) < 0.95
    stat = rng.gamma(2.0, 1.0, n_targets)
    online_lr(stat[:10], ref[:10], usable[:10], keep[:10])
    _, secs, cpu = timed(lambda: online_lr(stat, ref, usable, keep), "cpu")
    lrt = Row(
        "online-lrt",
        float(ref.nbytes + keep.nbytes + usable.nbytes),
        "byte",
        secs,
        cpu,
        1,
        f"T {n_targets} x R {n_refs}",
    )
    p_x, pr_x, p_z, pr_z = (rng.random(m) for m in (n_targets, n_targets, n_pop, n_pop))
    rmia_scores(p_x[:10], pr_x[:10], p_z[:10], pr_z[:10], gamma=1.0)
    _, secs, cpu = timed(lambda: rmia_scores(p_x, pr_x, p_z, pr_z, gamma=1.0), "cpu")
    rmia = Row("rmia", 8.0 * 2 * (n_targets + n_pop), "byte", secs, cpu, 1, f"T {n_targets}, Z {n_pop}")
    return [lrt, rmia]


def table(rows: list[Row], peaks: Peaks) -> str:
    """The markdown table of the rows against the peaks."""
    lines = [
        f"Peaks on {peaks.device} ({peaks.threads} torch threads), per CPU second: float32 matmul "
        f"{peaks.gflops:.1f} GFLOP/s ({peaks.gflops_1t:.1f} in one thread), copy bandwidth {peaks.gbps:.1f} GB/s; load average "
        f"{os.getloadavg()[0]:.1f}.",
        "",
        "| path | work | wall (s) | CPU (s) | rate per CPU second | threads | fraction of one core's peak | note |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        unit = "GB/s" if r.unit == "byte" else "GFLOP/s"
        work = f"{r.work / 1e9:.3g} G{r.unit}" if r.work else "not counted"
        rate = f"{r.rate():.2f} {unit}" if r.work else ""
        frac = r.fraction(peaks)
        lines.append(
            f"| {r.path} | {work} | {r.seconds:.3f} | {r.cpu_seconds:.3f} | {rate} | {r.threads} | "
            f"{'' if np.isnan(frac) else f'{frac:.1%}'} | {r.note} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"))
    ap.add_argument("--n-points", type=int, default=300, help="rejected HELOC non-members per recourse path")
    ap.add_argument("--repeats", type=int, default=5, help="timings of each peak measurement (the best is kept)")
    ap.add_argument("--models", type=int, default=8, help="MLPs trained at once in the batched-training path")
    ap.add_argument("--epochs", type=int, default=5, help="epochs of the batched-training path")
    ap.add_argument("--paths", nargs="+", default=["recourse", "privrecourse", "training", "scoring"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model-dir", default=str(ROOT / "benchmarks/results/models"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/roofline"))
    args = ap.parse_args()

    from recourse_privacy.models.device import describe_device, resolve_device, use_device

    device = str(resolve_device(args.device))
    with use_device(device):
        peaks = measure_peaks(device, args.repeats)
        peaks = Peaks(peaks.gflops, peaks.gflops_1t, peaks.gbps, peaks.threads, describe_device(device))
        print(f"load average at start {os.getloadavg()}")
        data = _prepare("heloc", Path(args.model_dir), args.seed)
        rows: list[Row] = []
        if "recourse" in args.paths:
            rows += bench_recourse(data, args.n_points, device)
        if "privrecourse" in args.paths:
            rows += bench_privrecourse(device)
        if "training" in args.paths:
            rows += bench_training(data, device, args.models, args.epochs)
        if "scoring" in args.paths:
            rows += bench_scoring(3200, 64, 3800)
    md = table(rows, peaks)
    print(md)
    print("\nwork formulas:\n" + "\n".join(f"- {k}: {v}" for k, v in FORMULAS.items()))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "roofline.md").write_text(md + "\n")
    with open(out / "roofline.csv", "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(
            ["path", "work", "unit", "seconds", "cpu_seconds", "rate_g_per_s", "threads", "fraction_of_peak", "note"]
        )
        for r in rows:
            wr.writerow(
                [r.path, r.work, r.unit, r.seconds, r.cpu_seconds, r.rate(), r.threads, r.fraction(peaks), r.note]
            )
    print(f"wrote {out / 'roofline.md'} and {out / 'roofline.csv'}")


if __name__ == "__main__":
    main()
