"""The table ``benchmarks/run.py`` prints: one row per figure, beside its target."""

from __future__ import annotations

import math

from recycling import row as recycling_row  # benchmarks/recycling.py


def _split_row(name: str, r: dict) -> str:
    parts = ", ".join(f"{k} {v:.2f}" for k, v in r["sweep_split"].items() if k != "cores")
    alone, paired = r["single_core_job_s"], r["side_by_side_job_s"]
    return (
        f"| {name}: a job alone {alone:.2f} s, one per core at once {paired:.2f} s (at most "
        f"{alone / paired:.3f}); sweep's wall, s per core (medians) | {parts} | |"
    )


def table(results: dict) -> str:
    lines = ["| benchmark | figure | target |", "|---|---|---|"]
    t = results.get("threads")
    if t:
        for k in (1, 2):
            if f"k{k}_capped" in t:
                lines.append(
                    f"| threads, k={k} | capped {t[f'k{k}_capped']:.0f}, uncapped {t[f'k{k}_uncapped']:.0f} "
                    f"({t[f'k{k}_ratio']:.2f}x) | capped k=1 <= 17 |"
                )
    c = results.get("compile_heavy")
    if c:
        others = ", ".join(
            f"{n} {c[f'{n}_s']:.1f} s ({c[f'{n}_over_sweep']:.2f}x)"
            for n in ("sweep_warm_cache", "job_array", "naive_dask", "loky", "parsl")
            if f"{n}_s" in c
        )
        lines.append(
            f"| compile-heavy, {c['jobs']} jobs | sweep {c['sweep_s']:.1f} s; {others} | job array >= 3x |"
        )
    e = results.get("efficiency")
    if e:
        lines.append(
            f"| efficiency, {e['jobs']} jobs of {e['single_core_job_s']:.2f} s | sweep {e['efficiency']:.3f} "
            f"(wall {e['sweep_wall_s']:.1f} s); loky {e['loky_efficiency']:.3f} "
            f"(wall {e['loky_wall_s']:.1f} s); Parsl HTEX {e.get('parsl_efficiency', float('nan')):.3f} "
            f"(wall {e.get('parsl_wall_s', float('nan')):.1f} s) | >= 0.9 |"
        )
        lines.append(_split_row("efficiency", e))
    i = results.get("invrs")
    if i:
        lines.append(
            f"| invrs-gym, {i['jobs']} L-BFGS-B runs of {i['steps']} steps | sweep {i['sweep_s']:.1f} s; "
            f"loky {i['loky_s']:.1f} s (sweep {i['sweep_s'] / i['loky_s']:.2f}x loky's wall); "
            f"Parsl HTEX {i['parsl_s']:.1f} s (sweep {i['sweep_s'] / i['parsl_s']:.2f}x) "
            "| <= 0.8x loky, <= 1.0x Parsl |"
        )
        lines.append(_split_row("invrs-gym", i))
    f = results.get("first_result")
    if f:
        parts = ", ".join(
            f"{k} {f[k]:.2f}"
            for k in ("import", "store_and_cluster", "setup", "to_job", "import_jax", "compile")
        )
        lines.append(f"| time to first result | {f['total']:.2f} s ({parts}) | |")
    o = results.get("overhead")
    if o:
        lines.append(
            f"| per-job overhead | warm {o['warm_ms']:.2f} ms, cold {o['cold_ms']:.0f} ms "
            f"({o['cold_over_warm']:.0f}x) | warm <= 20 ms |"
        )
        lines.append(f"| {o['points']} no-op points | {o['end_to_end_s']:.1f} s | <= 30 s |")
    s = results.get("scale")
    if s:
        lines.append(
            f"| {s['points']:.0f} no-op points | {s['wall_s']:.1f} s ({s['per_point_ms']:.2f} ms/point), "
            f"client peak RSS {s['client_peak_rss_mb']:.0f} MB, "
            f"store {100 * s['store_share']:.0f}% of wall; "
            f"{s['small_points']:.0f} points {s['small_wall_s']:.1f} s "
            f"({s['growth']:.1f}x for {s['points'] / s['small_points']:.0f}x the points) "
            "| <= 120 s, RSS <= 1 GB |"
        )
    if results.get("recycling"):
        lines.append(recycling_row(results["recycling"]))
    m = results.get("million")
    if m:
        lines.append(
            f"| {m['points']:,} no-op points | {m['wall_s']:.0f} s ({m['per_point_ms']:.2f} ms/point), "
            f"client peak RSS {m['client_peak_rss_mb']:.0f} MB | <= 300 s, RSS <= 1 GB |"
        )
    aff = results.get("affinity")
    if aff:
        parts = "; ".join(
            f"{w}: widened {x['widened_over_pinned']:.2f}x, unpinned {x['unpinned_over_pinned']:.2f}x "
            f"(peak threads {x['pinned_threads']}/{x['widened_threads']}/{x['unpinned_threads']})"
            for w, x in aff.items()
        )
        lines.append(f"| affinity: pairs side by side, wall over pinned's | {parts} | by measurement |")
    for u in (results.get("auto_threads"), results.get("auto_threads_long")):
        if not u:
            continue
        for w in ("matmul", "invrs"):
            if w in u:
                x = u[w]
                fixed = ", ".join(f"k={k} {x[f'k{k}_s']:.1f} s" for k in u["candidates"])
                chose = sorted({c["chosen"] for c in x["chosen"]})
                lines.append(
                    f"| threads: auto, {u['jobs']} {w} points | auto {x['sweep_s']:.1f} s (chose k = "
                    f"{', '.join(map(str, chose))}; **{x['auto_over_best']:.2f}x** the best fixed k, "
                    f"{x['auto_minus_best_s']:+.1f} s; rounds at the ks that lost "
                    f"{x['losers_median_s']:.1f} s); "
                    f"{fixed} | <= 1.05x best; <= k=1 + calibration |"
                )
    r = results.get("ramp")
    if r:
        lines.append(
            f"| ramp: {r['jobs']} sleep jobs of {r['seconds']:.0f} s on {r['slots']} simulated slots "
            f"({r['nodes']} workers of {r['cores_per_node']}) | sweep {r['sweep_wall_s']:.1f} s, raw Dask "
            f"{r['dask_wall_s']:.1f} s (**{r['sweep_over_dask']:.2f}x**; ideal {r['ideal_s']:.1f} s); every "
            f"slot busy after {r['all_busy_s']:.1f} s (the first after {r['first_start_s']:.1f} s; "
            f"{r['slots']} child starts of {r['child_start_cpu_s'] * 1000:.0f} ms CPU on this machine's "
            f"cores take {r['start_floor_s']:.1f} s at least) | <= 1.15x raw Dask; all busy <= 5 s |"
        )
    for key in ("search", "search_cavity_best", "search_invrs", "search_invrs_best"):
        a = results.get(key)
        if a:
            lines.append(_search_row(a))
    out = results.get("outputs")
    if out:
        parts = "; ".join(
            f"{n}: {x['store_s']:.2f} s (plain xarray {x['plain_xarray_s']:.2f} s, {x['ratio']:.1f}x)"
            for n, x in out.items()
        )
        lines.append(f"| scalar outputs of a 2-point sweep: store seconds | {parts} | 3000 in seconds |")
    return "\n".join(lines)


def _search_row(a: dict) -> str:
    """The table's row for one adaptive search workload (benchmarks/adaptive.py)."""
    workload = a.get("workload", "cavity")
    beside = ""  # Ray Tune runs beside the cavity only; random + ASHA where asked
    if a["runs"]["ray"]:
        beside = (
            f"; Ray Tune (OptunaSearch + ASHA) {a['ray_wall_s']:.1f} s, best {a['ray_best']:.1f}, "
            f"peak threads {a['ray_peak_threads']:.0f} a trial process"
        )
    elif workload == "cavity":
        beside = "; Ray Tune not run (needs root, unshare, ip)"
    if "random_asha_cpu_to_random_best_ratio" in a:  # the pruner alone, on random search's draws
        beside += (
            f"; random search + ASHA {100 * a['random_asha_cpu_to_random_best_ratio']:.0f}% "
            f"({100 * a['random_asha_over_random_total']:.0f}% of all), {a['random_asha_pruned']:.0f} pruned"
        )
    ranks = ", ".join(f"{100 * float(f):.0f}% {r:.2f}" for f, r in a.get("spearman", {}).items())
    return (
        f"| search, {a['n_trials']} trials of the {workload} | TPE + ASHA reaches "
        f"random search's best with **{100 * a['cpu_to_random_best_ratio']:.0f}%** of its CPU-seconds "
        f"until then ({100 * a.get('cpu_over_random_total', math.nan):.0f}% of all of them); sweep "
        f"TPE + ASHA {a['tpe_asha_wall_s']:.1f} s, best {a['tpe_asha_best']:.4g} (random "
        f"{a['random_best']:.4g}), {a['tpe_asha_pruned']:.0f} pruned, peak threads "
        f"{a['tpe_asha_peak_threads']:.0f}{beside}; early objective vs final, Spearman at {ranks or 'n/a'} "
        "| <= 50%; no slower than Ray, fewer threads |"
    )
