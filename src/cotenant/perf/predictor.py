"""Pairwise co-location speed predictor: two jobs' normalised speeds from solo features.

A scheduler that pairs an offline job with an online service (MuxFlow's matching) needs the
speed each keeps when they share a GPU, before it has ever run the pair. This model predicts it
from what is known about each job *alone*: GPU utilisation (share of time a kernel runs), SM
activity and the share of the GPU's memory it uses. For job ``x`` sharing with job ``y``::

    speed_x = clip(w0 + w1*util_x + w2*util_y + w3*sm_x*sm_y + w4*mem_x + w5*mem_y, 0.01, 1)

and symmetrically for ``y``; the six weights are fitted by ridge least squares (``RIDGE``, the
intercept unpenalised) over both directions of every training pair.

**Training data** (package data in ``perf/data/``, each file citing its source):

* ``tally_pairs.csv`` + ``tally_jobs.csv`` (tally-project/tally-bench, A100-40GB): 12 pairs of
  an inference server at load 0.5 (high priority) and a training job, under plain MPS. The
  server's speed is its stand-alone p99 over its co-located p99 (its load is fixed, so
  interference shows as latency); the training job's is its normalised throughput. Solo
  features: ``gpu_util_pct``, memory ``gpu_mem_mb`` over 40 GiB; SM activity is not published,
  so it is the utilisation. This is the default predictor's training set: it is the setting
  MuxFlow faces (online inference + offline training, MPS).
* ``gavel_pairs.csv`` + ``gavel_jobs.csv`` (stanford-futuredata/gavel, V100 and P100): 28
  training-job pairs per GPU. No solo utilisation or memory is published, so the only solo
  feature is derived from what Gavel itself profiles alone, the isolated throughput: a job's
  V100-over-P100 speed-up, divided by the largest speed-up among the seven jobs, stands in for
  utilisation and SM activity (a job that gains from the faster GPU is GPU-bound); memory is
  unknown and set to 0. Evaluated separately, not used by :func:`default_predictor`.

**Honest limits.** The features are thin: in the Tally set, utilisation mostly separates the
two inference servers (~45%) from the training jobs (50-100%), so the fit learns "servers
suffer, trainers do not" more than a law of contention. It has never seen training+training
or inference+inference pairs. With two servers in it, the per-model difference between them
dominates: the 7B-parameter llama server (39% of memory) suffers far less than the small BERT
server (4%), so the fitted weight on a job's *own* memory comes out positive. That is a fact
about these two models, not a law of contention; replace the data to change it. ``RIDGE``
(the shipped predictor's penalty) was picked among :data:`RIDGE_GRID` by the leave-one-job-out
error on the Tally set. That choice saw the held-out jobs, so :func:`evaluate_shipped` does
not report it: it chooses the penalty again inside every fold, from the fold's training pairs
only (nested cross-validation), and reports that error.
:func:`evaluate` reports the held-out error next to a naive baseline (the training mean);
``cotenant perf predictor`` prints both, and docs/results/colocation.md records them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from cotenant.errors import InputError
from cotenant.perf import published

RIDGE = 0.01
"""Ridge penalty per training row on the five non-intercept weights."""
RIDGE_GRID = (0.0, 1e-3, 1e-2, 1e-1)
"""The penalties a nested evaluation chooses from inside each fold."""
FLOOR = 0.01
"""Smallest predicted speed: a co-located job never stops entirely."""
SCHEMES = ("job", "pair")


@dataclass(frozen=True)
class SoloProfile:
    """What is known about a job running alone on the GPU."""

    gpu_util: float  # 0..1 share of time a kernel runs, alone
    sm_activity: float  # 0..1 (use gpu_util where unknown)
    memory_frac: float  # 0..1 of the GPU's memory


@dataclass(frozen=True)
class PairRow:
    """One measured pair: each job's solo profile and its normalised speed when sharing."""

    job_a: str
    job_b: str
    a: SoloProfile
    b: SoloProfile
    speed_a: float
    speed_b: float


@dataclass(frozen=True)
class PairPredictor:
    """Fitted weights of the model in the module docstring."""

    coef: tuple[float, float, float, float, float, float]
    n_rows: int  # pairs it was fitted on
    ridge: float = RIDGE

    def predict(
        self,
        a_util: np.ndarray | float,
        a_sm: np.ndarray | float,
        a_mem: np.ndarray | float,
        b_util: np.ndarray | float,
        b_sm: np.ndarray | float,
        b_mem: np.ndarray | float,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Vectorised over numpy arrays (broadcasting): normalised speed of a and of b when
        co-located (each in (0, 1]). Computes in float32 when every input is float32, else
        float64. The terms of each side are summed on its own (small) arrays first, so a
        20,000 x 300 broadcast makes only a few full-size passes."""
        raw = [np.asarray(v) for v in (a_util, a_sm, a_mem, b_util, b_sm, b_mem)]
        dtype = np.result_type(*raw, np.float32)
        au, asm, am, bu, bsm, bm = (v.astype(dtype, copy=False) for v in raw)
        w0, w1, w2, w3, w4, w5 = (dtype.type(w) for w in self.coef)
        own_a, as_partner_a = w0 + w1 * au + w4 * am, w2 * au + w5 * am
        own_b, as_partner_b = w0 + w1 * bu + w4 * bm, w2 * bu + w5 * bm
        shape = np.broadcast_shapes(*(v.shape for v in raw))
        shared = np.multiply(w3 * asm, bsm, out=np.empty(shape, dtype))  # symmetric term
        speed_a = np.add(shared, own_a, out=np.empty(shape, dtype))
        speed_a += as_partner_b
        shared += own_b
        shared += as_partner_a
        return np.clip(speed_a, FLOOR, 1.0, out=speed_a), np.clip(shared, FLOOR, 1.0, out=shared)

    def predict_pair(self, a: SoloProfile, b: SoloProfile) -> tuple[float, float]:
        """Normalised speeds of ``a`` and ``b`` sharing one GPU."""
        sa, sb = self.predict(
            a.gpu_util, a.sm_activity, a.memory_frac, b.gpu_util, b.sm_activity, b.memory_frac
        )
        return float(sa), float(sb)


def _design(rows: Sequence[PairRow]) -> tuple[np.ndarray, np.ndarray]:
    """Two rows per pair (a with b, b with a): features and measured speeds."""
    x, y = [], []
    for r in rows:
        for me, other, speed in ((r.a, r.b, r.speed_a), (r.b, r.a, r.speed_b)):
            x.append(
                [
                    1.0,
                    me.gpu_util,
                    other.gpu_util,
                    me.sm_activity * other.sm_activity,
                    me.memory_frac,
                    other.memory_frac,
                ]
            )
            y.append(speed)
    return np.asarray(x, dtype=np.float64).reshape(-1, 6), np.asarray(y, dtype=np.float64)


def fit_predictor(rows: Sequence[PairRow], *, ridge: float = RIDGE) -> PairPredictor:
    """Ridge least squares over both directions of every pair (intercept unpenalised)."""
    if not rows:
        raise InputError("predictor", "no pairs to fit on")
    if ridge < 0:
        raise InputError("predictor", f"ridge {ridge} must be >= 0")
    x, y = _design(rows)
    penalty = ridge * len(y) * np.eye(6)
    penalty[0, 0] = 0.0
    w = np.linalg.lstsq(x.T @ x + penalty, x.T @ y, rcond=None)[0]
    coef = (float(w[0]), float(w[1]), float(w[2]), float(w[3]), float(w[4]), float(w[5]))
    return PairPredictor(coef=coef, n_rows=len(rows), ridge=ridge)


@dataclass(frozen=True)
class PredictorReport:
    """Held-out error of the predictor and of the naive baseline (the training-fold mean)."""

    dataset: str
    scheme: str  # "job": leave one job out; "pair": leave one pair out
    n_pairs: int
    n_predictions: int  # speeds predicted held out (a job-out scheme predicts a pair twice)
    mae: float
    rmse: float
    baseline_mae: float
    baseline_rmse: float

    @property
    def beats_baseline(self) -> bool:
        return self.mae < self.baseline_mae

    @property
    def verdict(self) -> str:
        """Against the baseline on both errors: ``better`` (both lower), ``worse`` (neither
        lower) or ``mixed`` (one lower, one not: e.g. a lower MAE with a higher RMSE)."""
        lower = (self.mae < self.baseline_mae) + (self.rmse < self.baseline_rmse)
        return ("worse", "mixed", "better")[lower]


def _folds(rows: Sequence[PairRow], scheme: str) -> list[tuple[list[int], list[int]]]:
    index = range(len(rows))
    if scheme == "pair":
        return [([j for j in index if j != i], [i]) for i in index]
    jobs = sorted({r.job_a for r in rows} | {r.job_b for r in rows})
    folds = []
    for job in jobs:
        test = [i for i in index if job in (rows[i].job_a, rows[i].job_b)]
        train = [i for i in index if i not in test]
        if train:
            folds.append((train, test))
    return folds


def _inner_ridge(rows: Sequence[PairRow], scheme: str) -> float:
    """The penalty of :data:`RIDGE_GRID` with the least held-out error on ``rows`` alone;
    :data:`RIDGE` where ``rows`` are too few to hold any out."""
    try:
        return min(RIDGE_GRID, key=lambda r: evaluate(rows, scheme=scheme, ridge=r).mae)
    except InputError:
        return RIDGE


def evaluate(
    rows: Sequence[PairRow], *, scheme: str = "job", dataset: str = "",
    ridge: float | None = RIDGE,
) -> PredictorReport:
    """Held-out error: each fold fits on the rest and predicts the held-out pairs' speeds.
    ``ridge=None`` chooses the penalty inside each fold from its training pairs alone
    (nested), so the held-out pairs play no part in any choice."""
    if scheme not in SCHEMES:
        raise InputError("scheme", f"{scheme!r} is not one of {', '.join(SCHEMES)}")
    model_err: list[np.ndarray] = []
    base_err: list[np.ndarray] = []
    for train, test in _folds(rows, scheme):
        held = [rows[i] for i in test]
        training = [rows[i] for i in train]
        chosen = _inner_ridge(training, scheme) if ridge is None else ridge
        fitted = fit_predictor(training, ridge=chosen)
        x, y = _design(held)
        model_err.append(np.clip(x @ np.asarray(fitted.coef), FLOOR, 1.0) - y)
        base_err.append(_design([rows[i] for i in train])[1].mean() - y)
    if not model_err:
        raise InputError(dataset or "predictor", "need pairs of at least two jobs to evaluate")
    e, b = np.concatenate(model_err), np.concatenate(base_err)
    return PredictorReport(
        dataset=dataset,
        scheme=scheme,
        n_pairs=len(rows),
        n_predictions=int(e.size),
        mae=float(np.abs(e).mean()),
        rmse=float(np.sqrt((e**2).mean())),
        baseline_mae=float(np.abs(b).mean()),
        baseline_rmse=float(np.sqrt((b**2).mean())),
    )


# --- shipped data --------------------------------------------------------------------------


def tally_pairs(mechanism: str = "mps") -> list[PairRow]:
    """Tally's 12 inference-server + training pairs under ``mechanism`` (a column of
    ``tally_pairs.csv``: mps, mps_priority, time_slicing, tally, tgs), with solo footprints."""
    if mechanism not in published.MECHANISMS:
        raise InputError("predictor mechanism", f"{mechanism!r} is not one of "
                         f"{', '.join(published.MECHANISMS)}")
    gpu_mib = published.tally_gpu_memory_mib()
    jobs = {j.name: SoloProfile(j.gpu_util, j.gpu_util, j.memory_mb / gpu_mib)
            for j in published.tally_jobs()}
    return [
        PairRow(p.hp_job, p.be_job, jobs[p.hp_job], jobs[p.be_job],
                min(1.0, 1.0 / p.hp_p99_ratio[mechanism]),
                min(1.0, p.be_norm_tput[mechanism]))
        for p in published.tally_pairs()
    ]


def gavel_pairs(gpu: str = "V100") -> list[PairRow]:
    """Gavel's 28 single-GPU training pairs on ``gpu`` (V100 or P100), features derived from
    isolated throughputs (see the module docstring)."""
    speedup = {}
    for line, row in published.table("gavel_jobs.csv"):
        v100 = published.number("gavel_jobs.csv", line, row, "v100_steps_per_s")
        p100 = published.number("gavel_jobs.csv", line, row, "p100_steps_per_s")
        if v100 == 0 or p100 == 0:
            raise InputError(f"gavel_jobs.csv:{line}", "a job's steps per second must be > 0 "
                             "on both GPUs (its features are the V100 over P100 speed-up)")
        speedup[row["job"]] = v100 / p100
    top = max(speedup.values())
    solo = {job: SoloProfile(s / top, s / top, 0.0) for job, s in speedup.items()}
    cell = {
        (row["row_job"], row["col_job"]):
            published.number("gavel_pairs.csv", line, row, "row_norm_tput")
        for line, row in published.table("gavel_pairs.csv")
        if row["gpu"] == gpu
    }
    if not cell:
        raise InputError("gavel_pairs.csv", f"no pairs for GPU {gpu!r}; have V100, P100")
    names = sorted(solo)
    return [
        PairRow(a, b, solo[a], solo[b], min(1.0, cell[a, b]), min(1.0, cell[b, a]))
        for i, a in enumerate(names)
        for b in names[i:]
    ]


DATASETS: dict[str, Callable[[], list[PairRow]]] = {
    "tally-a100-mps": tally_pairs,
    "tally-a100-time-slicing": lambda: tally_pairs("time_slicing"),
    "tally-a100-priority": lambda: tally_pairs("tally"),
    "gavel-v100": lambda: gavel_pairs("V100"),
    "gavel-p100": lambda: gavel_pairs("P100"),
}
"""The shipped pair sets; the first trains :func:`default_predictor`."""


@cache
def default_predictor() -> PairPredictor:
    """Fitted on Tally's MPS pairs (online inference + offline training), cached."""
    return fit_predictor(tally_pairs())


@cache
def predictor_for(mechanism: str) -> PairPredictor:
    """Fitted on Tally's pairs under ``mechanism`` (its column name), cached: the matching of
    a policy predicts the speeds of the sharing it will run."""
    return fit_predictor(tally_pairs(mechanism))


def evaluate_shipped() -> list[PredictorReport]:
    """Every shipped dataset under both held-out schemes, the penalty chosen inside each
    fold (nested)."""
    return [
        evaluate(load(), scheme=scheme, dataset=name, ridge=None)
        for name, load in DATASETS.items()
        for scheme in SCHEMES
    ]
