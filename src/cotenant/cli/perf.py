"""``cotenant perf``: the performance models' own checks (the co-location speed predictor)."""

from __future__ import annotations

import json
from dataclasses import asdict

import typer

from cotenant.cli.options import JsonOpt
from cotenant.perf.predictor import default_predictor, evaluate_shipped

app = typer.Typer(help="Inspect the performance models.", no_args_is_help=True)


@app.callback()
def _group() -> None:
    """Inspect the performance models."""


@app.command()
def predictor(json_out: JsonOpt = False) -> None:
    """Held-out error of the pairwise co-location speed predictor vs a naive baseline."""
    model = default_predictor()
    reports = evaluate_shipped()
    if json_out:
        rows = [{**asdict(r), "beats_baseline": r.beats_baseline, "verdict": r.verdict}
                for r in reports]
        typer.echo(json.dumps({"default": asdict(model), "held_out": rows}, indent=2))
        return
    weights = ", ".join(f"{w:+.3f}" for w in model.coef)
    typer.echo(f"default predictor (Tally A100 MPS pairs, {model.n_rows} pairs): w = {weights}")
    typer.echo("held-out error of normalised speed (baseline: predict the training mean)")
    head = f"{'dataset':<16}{'held out':<10}{'pairs':>6}{'preds':>7}"
    typer.echo(f"{head}{'MAE':>8}{'RMSE':>8}{'base MAE':>10}{'base RMSE':>11}  vs base")
    for r in reports:
        typer.echo(
            f"{r.dataset:<16}{'one ' + r.scheme:<10}{r.n_pairs:>6}{r.n_predictions:>7}"
            f"{r.mae:>8.4f}{r.rmse:>8.4f}{r.baseline_mae:>10.4f}{r.baseline_rmse:>11.4f}"
            f"  {r.verdict}"
        )
    typer.echo("vs base: better = both errors lower than the baseline's, worse = neither, "
               "mixed = one of the two")
