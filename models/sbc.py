"""Simulation-based calibration (SBC; Talts et al. 2018) of the models in :mod:`models`.

For a model p(θ) p(y | θ) with a fixed *design* (every data container that is not an outcome:
trials per policy, lineage, ξ settings, standard errors, ...), one replication n is

    θ̃_n ~ p(θ),   ỹ_n ~ p(y | θ̃_n)                               (one prior-predictive draw)
    θ_n^(1), …, θ_n^(L) ~ p(θ | ỹ_n)                              (L thinned posterior draws)
    r_n = #{ℓ : f(θ_n^(ℓ)) < f(θ̃_n)} ∈ {0, …, L}                   (rank of the truth)

for a few scalar quantities f (a hyperparameter, a group-level parameter, ...).  When the
fitting model is the generating model and the sampler is exact, every r_n is discrete uniform on
{0, …, L} (Talts et al. 2018, Theorem 1); a posterior that is too narrow gives ⋃-shaped ranks,
one that is too wide ∩-shaped ranks, a biased one a slope.

**Thinning.**  NUTS draws are autocorrelated and ranks among autocorrelated draws are not
uniform, so each fit draws C chains × D draws and keeps L of them at a stride of ⌊C·D / L⌋
(chain-major), e.g. 2 × 300 draws, stride 6, L = 99: 100 possible ranks 0..99.

**Uniformity test.**  The N ranks of a quantity are binned into B equiprobable bins (B divides
L + 1; bin b holds ranks b·(L+1)/B … (b+1)·(L+1)/B − 1), and Pearson's statistic

    χ² = Σ_b (O_b − N/B)² / (N/B),   χ² ~ χ²_{B−1} under uniformity

gives a p-value (``scipy.stats.chisquare``).  With K quantities per model the family-wise
level α is split by Bonferroni: the model passes when min_k p_k ≥ α / K, i.e. when the adjusted
p-value p_adj = min(1, K · min_k p_k) ≥ α.

**Mis-specified variants.**  A case's data are always simulated from the model's own priors
(``priors``); the *fitting* model may use other priors (``fit_priors``), e.g. one prior scale
divided by 4.  Each prior setting is a separately compiled model (the models' ``_COMPILED``
caches key on the priors), so the correct fitting model is the production one.

The fitting model is compiled once per case (nutpie, numba backend) and every replication swaps
its data with ``compiled.with_data(...)``.  Likelihood terms written as ``pm.Potential``
(summary-level gain estimates, the transfer model's normal family) have no prior predictive;
a case that uses them simulates its outcomes itself (``simulate_outcomes``).

Cases: :func:`gains_case`, :func:`exec_risk_case`, :func:`sensitivity_case`,
:func:`transfer_case`, :func:`sim_proxy_case`; run with :func:`run_sbc`, test with
:func:`rank_uniformity`.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from belief.errors import InputError
from belief.inputs.candidates import candidates_from_dict
from models.registry import MODELS, model_names

__all__ = ["MISSPECIFIED_SCALE", "SBCCase", "SBCResult", "exec_risk_case", "gains_case",
           "model_case", "rank_uniformity", "ranks_to_pit", "run_sbc", "scaled_priors",
           "sensitivity_case", "sim_proxy_case", "transfer_case"]


@dataclass
class SBCCase:
    """One model with a fixed design, ready for SBC.

    Attributes
    ----------
    name : str
        Label used in reports (e.g. ``"gains"``, ``"gains, effect_mu_sigma ÷ 4"``).
    generator : pm.Model
        The model with the *generating* priors, its data containers filled with the design;
        its prior predictive draws (θ̃, ỹ).
    compiled : nutpie compiled model
        The *fitting* model (possibly other priors), compiled once.
    design : dict of str to array
        Every data container of the fitting model, held fixed across replications.
    outcomes : dict of str to str
        Observed variable of ``generator`` → data container it fills (prior predictive).
    quantities : dict of str to (str, dict)
        Label → (posterior variable, ``.sel`` indexers) of each scalar quantity ranked.
    target_accept : float
        NUTS target acceptance of the fits (the model's production default).
    refresh : callable, optional
        ``data → {container: array}``: containers of the fitting model derived from the
        outcomes (the normal approximations that set its geometry), recomputed for every
        replication.
    simulate_outcomes : callable, optional
        ``(prior Dataset over draw, rng) → {container: array (draw, ...)}`` for models whose
        likelihood is a ``pm.Potential`` (no prior predictive).
    description : str
        The design in words (for the report).
    """

    name: str
    generator: Any
    compiled: Any
    design: dict[str, np.ndarray]
    outcomes: dict[str, str]
    quantities: dict[str, tuple[str, dict[str, Any]]]
    target_accept: float = 0.9
    simulate_outcomes: Callable[[xr.Dataset, np.random.Generator],
                                dict[str, np.ndarray]] | None = None
    description: str = ""
    refresh: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] | None = None


@dataclass
class SBCResult:
    """Ranks of the true values among thinned posterior draws, one row per replication.

    Attributes
    ----------
    name : str
    ranks : DataArray (``replication``, ``quantity``) of int in 0..``n_draws``
    n_draws : int
        L, the number of thinned posterior draws per fit (ranks take L + 1 values).
    divergences : array (replication,)
        Divergent transitions of each fit (all draws, before thinning).
    seconds : float
        Wall time of the replications (prior predictive and fits; compile excluded).
    settings : dict
        Sampler settings (draws, tune, chains, stride, seed).
    """

    name: str
    ranks: xr.DataArray
    n_draws: int
    divergences: np.ndarray
    seconds: float
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def n_sims(self) -> int:
        return int(self.ranks.sizes["replication"])

    def head(self, n: int) -> SBCResult:
        """The first ``n`` replications (for power curves over the replication count)."""
        return replace(self, ranks=self.ranks.isel(replication=slice(0, n)),
                       divergences=self.divergences[:n])


def scaled_priors(priors: Any, name: str, factor: float) -> Any:
    """A copy of a frozen priors dataclass with one scale multiplied by ``factor`` (a number,
    or the scale of a :class:`models.priors.ScalePrior`, see :meth:`ScalePrior.scaled`)."""
    from models.priors import ScalePrior

    if not hasattr(priors, name):
        raise InputError(type(priors).__name__, f"has no prior {name!r}")
    if not np.isfinite(factor) or factor <= 0:
        raise InputError(type(priors).__name__, f"scale factor must be > 0, got {factor!r}")
    value = getattr(priors, name)
    new = value.scaled(factor) if isinstance(value, ScalePrior) else value * factor
    return replace(priors, **{name: new})


# -- running ---------------------------------------------------------------------------------
def _simulate(case: SBCCase, n_sims: int, seed: int) -> tuple[xr.Dataset, list[dict]]:
    """Prior draws θ̃_n (Dataset over ``draw``) and the full data dict of each replication."""
    import pymc as pm

    with case.generator, warnings.catch_warnings():
        # Potentials are likelihood terms here (masked gain estimates, transfer normal family):
        # ignoring them is exactly right for draws from the prior
        warnings.filterwarnings("ignore", message="The effect of Potentials")
        warnings.filterwarnings("ignore", message="Duplicate dimension names")
        # forward sampling only: the C/Python VM compiles in ~1 s, numba would take 10-20 s
        prior = pm.sample_prior_predictive(draws=n_sims, random_seed=seed,
                                           compile_kwargs={"mode": "FAST_COMPILE"})
    theta = prior["prior"].to_dataset().isel(chain=0)
    if case.simulate_outcomes is not None:
        sims = case.simulate_outcomes(theta, np.random.default_rng([seed, 1]))
    else:
        pp = prior["prior_predictive"].to_dataset().isel(chain=0)
        sims = {container: pp[var].transpose("draw", ...).to_numpy()
                for var, container in case.outcomes.items()}
    datasets = []
    for i in range(n_sims):
        data = dict(case.design)
        for container, arr in sims.items():
            data[container] = arr[i].astype(np.asarray(case.design[container]).dtype)
        if case.refresh is not None:
            data.update(case.refresh(data))
        datasets.append(data)
    return theta, datasets


def _scalar(ds: xr.Dataset, var: str, sel: Mapping[str, Any]) -> xr.DataArray:
    da = ds[var].sel(**sel) if sel else ds[var]
    extra = [d for d in da.dims if d not in ("chain", "draw")]
    if extra:
        raise InputError("SBC quantity", f"{var}{dict(sel)} is not scalar (dims {extra})")
    return da


def run_sbc(case: SBCCase, n_sims: int, *, seed: int = 0, n_draws: int = 99,
            draws: int = 300, tune: int = 300, chains: int = 2) -> SBCResult:
    """Run ``n_sims`` SBC replications of ``case``.

    Each replication simulates (θ̃_n, ỹ_n) from the generator's prior predictive, fits the
    compiled fitting model to ỹ_n (``chains`` × ``draws`` after ``tune``; seed derived from
    ``(seed, n)``) and ranks every quantity's true value among ``n_draws`` = L draws kept at
    stride ⌊chains·draws / L⌋ (see module docstring).

    Returns
    -------
    SBCResult
    """
    import nutpie

    if n_sims < 1:
        raise InputError("run_sbc", f"n_sims must be >= 1, got {n_sims}")
    stride = chains * draws // n_draws
    if stride < 1:
        raise InputError("run_sbc", f"chains·draws = {chains * draws} < n_draws = {n_draws}")
    t0 = time.perf_counter()
    theta, datasets = _simulate(case, n_sims, seed)
    labels = list(case.quantities)
    ranks = np.zeros((n_sims, len(labels)), dtype=np.int64)
    divergences = np.zeros(n_sims, dtype=np.int64)
    for i, data in enumerate(datasets):
        fit_seed = int(np.random.default_rng([seed, 2, i]).integers(2**31))
        idata = nutpie.sample(case.compiled.with_data(**data), draws=draws, tune=tune,
                              chains=chains, seed=fit_seed, progress_bar=False,
                              target_accept=case.target_accept, save_warmup=False)
        post = idata["posterior"].to_dataset()
        if "sample_stats" in idata.children and "diverging" in idata["sample_stats"]:
            divergences[i] = int(idata["sample_stats"]["diverging"].sum())
        for j, label in enumerate(labels):
            var, sel = case.quantities[label]
            flat = _scalar(post, var, sel).transpose("chain", "draw").to_numpy().ravel()
            kept = flat[::stride][:n_draws]
            truth = float(_scalar(theta, var, sel).isel(draw=i))
            ranks[i, j] = int((kept < truth).sum())
    seconds = time.perf_counter() - t0
    da = xr.DataArray(ranks, dims=("replication", "quantity"),
                      coords={"replication": np.arange(n_sims), "quantity": labels},
                      name="rank")
    return SBCResult(case.name, da, n_draws, divergences, seconds,
                     {"draws": draws, "tune": tune, "chains": chains, "stride": stride,
                      "seed": seed, "target_accept": case.target_accept})


def rank_uniformity(result: SBCResult, bins: int = 10, alpha: float = 0.01) -> xr.Dataset:
    """Pearson χ² test of uniform ranks per quantity, Bonferroni across quantities.

    Ranks r ∈ {0, …, L} go to bin ⌊r·B / (L + 1)⌋ (B = ``bins`` must divide L + 1, so the bins
    are equiprobable); χ² = Σ_b (O_b − N/B)² / (N/B) with B − 1 degrees of freedom.

    Returns
    -------
    Dataset
        Over ``quantity``: ``chi2``, ``p_value``, ``counts`` (``quantity``, ``bin``); attrs
        ``alpha`` (family-wise), ``threshold`` = α / K, ``p_adjusted`` = min(1, K·min p),
        ``passed`` (1 when p_adjusted ≥ α), ``n_sims``, ``n_draws``, ``bins``, ``df``.
    """
    if not 0 < alpha < 1:
        raise InputError("rank_uniformity", f"alpha must be in (0, 1), got {alpha!r}")
    L = result.n_draws
    if bins < 2 or (L + 1) % bins:
        raise InputError("rank_uniformity", f"bins ({bins}) must be >= 2 and divide "
                                            f"L + 1 = {L + 1}")
    r = result.ranks.to_numpy()
    n, k = r.shape
    which = r * bins // (L + 1)
    counts = np.stack([np.bincount(which[:, j], minlength=bins) for j in range(k)])
    test = stats.chisquare(counts, axis=1)
    p_min = float(np.min(test.pvalue))
    p_adj = min(1.0, k * p_min)
    return xr.Dataset(
        {"chi2": ("quantity", test.statistic), "p_value": ("quantity", test.pvalue),
         "counts": (("quantity", "bin"), counts)},
        coords={"quantity": result.ranks["quantity"].values, "bin": np.arange(bins)},
        attrs={"model": result.name, "alpha": alpha, "threshold": alpha / k,
               "p_adjusted": p_adj, "passed": int(p_adj >= alpha), "n_sims": n,
               "n_draws": L, "bins": bins, "df": bins - 1,
               "divergent_fits": int((result.divergences > 0).sum())})


def ranks_to_pit(result: SBCResult, seed: int = 0) -> xr.DataTree:
    """Ranks as randomised PIT values u = (r + U) / (L + 1), U ~ Uniform(0, 1).

    Under uniform ranks u is exactly Uniform(0, 1) (continuous), which is what
    ``arviz_plots.plot_ecdf_pit`` tests and plots.  Returns a DataTree with group ``prior_sbc``:
    one variable per quantity over (``chain`` = 1, ``draw`` = replication).
    """
    rng = np.random.default_rng(seed)
    r = result.ranks.to_numpy().astype(float)
    u = (r + rng.uniform(size=r.shape)) / (result.n_draws + 1)
    ds = xr.Dataset({q: (("chain", "draw"), u[None, :, j])
                     for j, q in enumerate(result.ranks["quantity"].values)})
    return xr.DataTree.from_dict({"prior_sbc": ds})


# -- cases -----------------------------------------------------------------------------------
EVAL = "sbc"


def _candidate_set(entries: list[dict[str, Any]]):
    return candidates_from_dict({"campaign": {"eval_protocol": EVAL},
                                 "candidate": entries}, source="SBC design")


def gains_design_candidates():
    """Six adaptations in four lenses / five methods (the synthetic world's structure)."""
    spec = [("si_friction", "model", "SI"), ("dr_1e6", "data", "DR"), ("dr_1e7", "data", "DR"),
            ("cotrain", "data", "co-training"), ("da_camera", "representation", "DA"),
            ("ft_real_100", "optimization", "FT")]
    return _candidate_set([{"id": c, "role": "adaptation", "lens": lens, "method": m,
                            "cost": {}, "repeatable": True} for c, lens, m in spec])


GAINS_LINEAGES = (("dr_1e6", "si_friction", "dr_1e6", "ft_real_100"),
                  ("dr_1e7", "cotrain", "da_camera"))


def gains_case(priors: Any = None, fit_priors: Any = None, *, trials: int = 100,
               name: str = "gains") -> SBCCase:
    """SBC case of :class:`models.gains.GainsModel` (binomial paired evaluations).

    Design: the six adaptations of :func:`gains_design_candidates`; root π_0 evaluated once
    (``trials``) and two lineages from it, π_0 → dr_1e6 → si_friction → dr_1e6 → ft_real_100
    and π_0 → dr_1e7 → cotrain → da_camera, each step a paired evaluation with ``trials`` per
    arm (so dr_1e6's second execution informs ρ); ``max_policies`` = 8 (all used),
    no summary-level estimates.  Quantities: μ_0, τ_lens, τ_exec, ρ, θ(dr_1e6) and the logit
    η of the end of the first lineage.
    """
    from models.gains import GainsModel, GainsPriors, encode_estimates

    priors = priors or GainsPriors()
    fit_priors = fit_priors or priors
    cands = gains_design_candidates()
    rows, k = [], 1
    for lineage in GAINS_LINEAGES:
        parent = "pi0"
        for step, m in enumerate(lineage):
            child = f"pi{k}"
            rows.append({"step": step, "candidate": m, "policy": parent, "eval_protocol": EVAL,
                         "control_successes": 0, "control_trials": trials,
                         "treated_successes": 0, "treated_trials": trials,
                         "treated_policy": child})
            parent, k = child, k + 1
    paired = pd.DataFrame(rows)
    evals = pd.DataFrame([{"step": 0, "policy": "pi0", "eval_protocol": EVAL, "successes": 0,
                           "trials": trials}])
    gen_spec = GainsModel(cands, priors, max_policies=k, max_estimates=1)
    fit_spec = GainsModel(cands, fit_priors, max_policies=k, max_estimates=1)
    enc = gen_spec.encode(paired, policy_evals=evals)
    est = encode_estimates(None, enc, gen_spec.gain_ids, 1, gen_spec.actors)
    design = fit_spec.data(enc, est)
    last = enc.names.index(f"pi{len(GAINS_LINEAGES[0])}")

    def refresh(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The fitting model's geometry inputs for the simulated counts."""
        enc_i = replace(enc, successes=np.asarray(data["successes"]))
        return fit_spec.data(enc_i, est)

    return SBCCase(
        name, gen_spec.build_generative(enc, est), fit_spec._compiled(), design,
        {"obs": "successes"},
        {"mu0": ("mu0", {}), "tau_lens": ("tau_lens", {}), "tau_exec": ("tau_exec", {}),
         "rho": ("rho", {}), "theta[dr_1e6]": ("effect", {"candidate": "dr_1e6"}),
         f"eta[{enc.names[last]}]": ("policy_logit", {"policy_slot": last}),
         **({"gamma[dr_1e6→ft_real_100]": ("gamma", {"pair": "dr_1e6→ft_real_100"})}
            if gen_spec.pairs else {})},
        target_accept=0.9, refresh=refresh,
        description=f"6 adaptations, 4 lenses, 5 methods; {k} policies on two lineages "
                    f"(one repeat of dr_1e6); {trials} trials per arm; generated level by "
                    "level (every lens, method and candidate), fitted by the merged, "
                    "non-centred model")


def exec_risk_design_candidates():
    """Six hardware candidates in two hardware groups (arm: 4, gripper: 2)."""
    spec = [("a1", "arm"), ("a2", "arm"), ("a3", "arm"), ("a4", "arm"), ("g1", "gripper"),
            ("g2", "gripper")]
    return _candidate_set([{"id": c, "role": "diagnosis", "lens": "model", "method": "probe",
                            "cost": {}, "drives_hardware": True, "hardware_group": g}
                           for c, g in spec])


EXEC_RISK_EXECUTIONS = (150, 60, 30, 10, 100, 20)


def exec_risk_case(priors: Any = None, fit_priors: Any = None, *,
                   executions: tuple[int, ...] = EXEC_RISK_EXECUTIONS,
                   name: str = "exec_risk") -> SBCCase:
    """SBC case of :class:`models.exec_risk.ExecRiskModel`.

    Design: :func:`exec_risk_design_candidates` with ``executions`` = (150, 60, 30, 10, 100, 20)
    runs each (the synthetic world's bench-run sizes).  Quantities: μ_0, σ_group, σ_cand,
    p_unsafe of the best- and the least-tested candidate (a1, a4).
    """
    from models.exec_risk import ExecRiskModel, ExecRiskPriors

    priors = priors or ExecRiskPriors()
    fit_priors = fit_priors or priors
    cands = exec_risk_design_candidates()
    n = np.asarray(executions, dtype=np.int64)
    gen = ExecRiskModel(cands, priors)
    fit = ExecRiskModel(cands, fit_priors)
    design = fit.data(n, np.zeros_like(n))
    return SBCCase(
        name, gen.build_generative(n, np.zeros_like(n)), fit._compiled(), design,
        {"obs": "unsafe"},
        {"mu0": ("mu0", {}), "sigma_group": ("sigma_group", {}),
         "sigma_candidate": ("sigma_candidate", {}),
         "p_unsafe[a1]": ("p_unsafe", {"candidate": "a1"}),
         "p_unsafe[a4]": ("p_unsafe", {"candidate": "a4"})},
        target_accept=0.9, refresh=lambda data: fit.data(n, data["unsafe"]),
        description=f"6 hardware candidates in 2 groups (4 + 2); executions {list(executions)}")


def sensitivity_case(priors: Any = None, fit_priors: Any = None, *, family: str = "binomial",
                     trials: int = 50, se: float = 0.3,
                     name: str = "sensitivity") -> SBCCase:
    """SBC case of :class:`models.sensitivity.SensitivityModel` on the standardised scale.

    Design: directions (friction, latency), two policies, a 3 × 3 grid of standardised
    settings ξ' ∈ {−√1.5, 0, √1.5} per direction (the standardisation of {0, ½, 1}) per policy:
    18 runs, ``trials`` each (binomial) or known se' = ``se`` (normal).  The data containers
    are filled directly (no re-standardisation of simulated outcomes), so this checks the
    PyMC model, not the encoder.  Quantities: μ_friction, τ_S, γ, α of policy 0 and
    S(friction, policy 0) (and σ for the normal family).
    """
    from models.sensitivity import SensitivityModel, SensitivityPriors

    priors = priors or SensitivityPriors()
    fit_priors = fit_priors or priors
    dirs = ("friction", "latency")
    level = np.array([-1.0, 0.0, 1.0]) * np.sqrt(1.5)
    g1, g2 = np.meshgrid(level, level, indexing="ij")
    xi_one = np.stack([g1.ravel(), g2.ravel()], axis=1)
    xi = np.concatenate([xi_one, xi_one])
    policy_idx = np.repeat(np.arange(2, dtype=np.int64), len(xi_one))
    r = len(xi)
    if family == "binomial":
        design = {"policy_idx": policy_idx, "xi": xi,
                  "successes": np.zeros(r, np.int64), "trials": np.full(r, trials, np.int64)}
        outcomes = {"obs": "successes"}
    else:
        design = {"policy_idx": policy_idx, "xi": xi, "y": np.zeros(r), "se": np.full(r, se)}
        outcomes = {"obs": "y"}
    gen = SensitivityModel(dirs, family, priors, max_policies=2)
    fit = SensitivityModel(dirs, family, fit_priors, max_policies=2)
    from models.sensitivity import SensitivityEncoding

    enc = SensitivityEncoding(family, list(dirs), ["p0", "p1"], policy_idx, xi, np.zeros(2),
                              np.ones(2), xi.min(0), xi.max(0), design.get(
                                  "successes", np.zeros(r, np.int64)),
                              design.get("trials", np.zeros(r, np.int64)),
                              design.get("y", np.zeros(r)), design.get("se", np.ones(r)))
    design = {**design, **fit.approximation(enc)}
    outcome = "successes" if family == "binomial" else "y"

    def refresh(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return fit.approximation(replace(enc, **{outcome: np.asarray(data[outcome])}))

    quantities = {"S_mu[friction]": ("S_mu", {"direction": "friction"}),
                  "S_tau": ("S_tau", {}), "gamma": ("gamma", {"pair": fit.pair_names[0]}),
                  "alpha[p0]": ("alpha", {"policy_slot": 0}),
                  "S[friction, p0]": ("S", {"direction": "friction", "policy_slot": 0})}
    if family == "normal":
        quantities["sigma"] = ("sigma", {})
    what = f"{trials} trials per run" if family == "binomial" else f"known se' = {se}"
    return SBCCase(name, gen.build_generative(enc), fit._compiled(), design, outcomes,
                   quantities, target_accept=0.9, refresh=refresh,
                   description=f"{family}; 2 directions, 2 policies, 3 × 3 grid per policy "
                               f"(18 runs), {what}")


def transfer_case(priors: Any = None, fit_priors: Any = None, *, family: str = "binomial",
                  policies: int = 4, trials: int = 100, se: float = 0.3,
                  name: str = "transfer") -> SBCCase:
    """SBC case of :class:`models.transfer.TransferModel`.

    Design: ``policies`` policy slots, all evaluated in sim and real with ``trials`` per domain
    (binomial) or a known standardised se' = ``se`` per domain (normal; the model's likelihood
    is a ``pm.Potential``, so outcomes are simulated here: y'_sim ~ N(η_sim, se'),
    y'_real ~ N(η_sim + shift, se')).  Quantities: μ_d, τ_d, η_sim and shift of policy 0.
    """
    from models.transfer import TransferEncoding, TransferModel, TransferPriors

    priors = priors or TransferPriors()
    fit_priors = fit_priors or priors
    p = policies
    if family == "binomial":
        design = {"sim_successes": np.zeros(p, np.int64), "sim_trials": np.full(p, trials),
                  "real_successes": np.zeros(p, np.int64), "real_trials": np.full(p, trials)}
        design = {k: np.asarray(v, np.int64) for k, v in design.items()}
        outcomes = {"sim_obs": "sim_successes", "real_obs": "real_successes"}
        simulate = None
    else:
        design = {"sim_y": np.zeros(p), "sim_se": np.full(p, se), "has_sim": np.ones(p),
                  "real_y": np.zeros(p), "real_se": np.full(p, se), "has_real": np.ones(p)}
        outcomes = {}

        def simulate(theta: xr.Dataset, rng: np.random.Generator) -> dict[str, np.ndarray]:
            eta = theta["eta_sim"].transpose("draw", "policy_slot").to_numpy()
            shift = theta["shift"].transpose("draw", "policy_slot").to_numpy()
            return {"sim_y": eta + se * rng.standard_normal(eta.shape),
                    "real_y": eta + shift + se * rng.standard_normal(eta.shape)}
    gen = TransferModel(priors, max_policies=p)
    fit = TransferModel(fit_priors, max_policies=p)
    enc = TransferEncoding(family, [f"p{i}" for i in range(p)], design, np.ones(p, np.int64))
    raw = list(design)
    design = fit.data(family, design)
    what = f"{trials} trials per domain" if family == "binomial" else f"known se' = {se}"

    def refresh(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return fit.data(family, {k: np.asarray(data[k]) for k in raw})

    return SBCCase(name, gen.build_generative(family, enc), fit._compiled(family), design,
                   outcomes,
                   {"shift_mu": ("shift_mu", {}), "shift_tau": ("shift_tau", {}),
                    "eta_sim[p0]": ("eta_sim", {"policy_slot": 0}),
                    "shift[p0]": ("shift", {"policy_slot": 0})},
                   target_accept=0.9, simulate_outcomes=simulate, refresh=refresh,
                   description=f"{family}; {p} policies evaluated in sim and real, {what}")


SIM_PROXY_TRIALS = (100, 20, 200)
"""(real trials per arm of a calibration candidate, of a target, sim trials per arm of every
candidate) in :func:`sim_proxy_case`."""


def sim_proxy_design_candidates():
    """Nine adaptations in three lenses, each lens with methods m0 (two candidates) and m1 (one),
    so that the lens, method and candidate levels all pool."""
    return _candidate_set([{"id": f"{lens[:3]}{j}", "role": "adaptation", "lens": lens,
                            "method": f"m{int(j == 1)}", "cost": {}}
                           for lens in ("data", "model", "optimization") for j in range(3)])


def sim_proxy_case(priors: Any = None, fit_priors: Any = None, *,
                   trials: tuple[int, int, int] = SIM_PROXY_TRIALS,
                   name: str = "sim_proxy") -> SBCCase:
    """SBC case of :class:`models.sim_proxy.SimProxyModel` (learned calibration).

    Design: :func:`sim_proxy_design_candidates`, one policy; every candidate has a real and a
    sim paired evaluation (control and treated arm each); candidates ``*0`` and ``*1`` of each
    lens have ``trials[0]`` real trials per arm (they calibrate the simulator), the *targets*
    ``*2`` have ``trials[1]``; every candidate has ``trials[2]`` sim trials per arm.

    The generator writes the model out level by level and centred (every lens, method and
    candidate its own real gain; θ^sim_m ~ Normal(a_l + b_l θ_m, σ_l); binomial arms), the
    joint distribution of the module docstring of :mod:`models.sim_proxy`; the fitting model is
    the production one (merged levels, data-informed non-centring), so SBC also checks that its
    change of variables is exact.  Quantities: a_0, b_0, log σ_0, τ_candidate, θ of a
    calibration candidate and of a target, θ^sim of the target.
    """
    import pymc as pm
    import pytensor.tensor as pt

    from models.sim_proxy import TARGET_ACCEPT, SimProxyEncoding, SimProxyModel, SimProxyPriors

    priors = priors or SimProxyPriors()
    fit_priors = fit_priors or priors
    n_calib, n_target, n_sim = trials
    cands = sim_proxy_design_candidates()
    fit = SimProxyModel(cands, fit_priors, max_policies=1)
    ids, m = fit.gain_ids, len(fit.gain_ids)
    real_n = np.array([n_target if c.endswith("2") else n_calib for c in ids], np.int64)
    arrays = {"real_ctrl_n": np.array([real_n.sum()], np.int64), "real_trt_n": real_n[None, :],
              "sim_ctrl_n": np.array([n_sim * m], np.int64),
              "sim_trt_n": np.full((1, m), n_sim, np.int64)}
    for dom in ("real", "sim"):
        arrays[f"{dom}_ctrl_k"] = np.zeros(1, np.int64)
        arrays[f"{dom}_trt_k"] = np.zeros((1, m), np.int64)
        arrays.update({f"{dom}_est": np.zeros(m), f"{dom}_est_se": np.ones(m),
                       f"{dom}_has_est": np.zeros(m)})
    enc = SimProxyEncoding(["pi0"], arrays)
    design = fit.data(enc)

    def refresh(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The fitting model's log C(n, k) and geometry inputs for the simulated counts."""
        return fit.data(SimProxyEncoding(["pi0"], {k: np.asarray(data[k]) for k in arrays}))

    methods = list(dict.fromkeys(f"{c.lens}/{c.method}" for c in cands if c.id in ids))
    by_id = {c.id: c for c in cands}
    method_of = np.array([methods.index(f"{by_id[c].lens}/{by_id[c].method}") for c in ids])
    lens_of_method = np.array([fit.lenses.index(mm.split("/")[0]) for mm in methods])
    pr = priors
    with pm.Model(coords={"candidate": ids, "lens": fit.lenses, "method": methods,
                          "policy_slot": [0]}) as gen:
        tau = {lv: getattr(pr, f"tau_{lv}").rv(f"tau_{lv}")
               for lv in ("lens", "method", "candidate")}
        mu0 = pm.Normal("mu0", pr.effect_mu_mu, pr.effect_mu_sigma)
        lens = pm.Normal("lens_effect", mu0, tau["lens"], dims="lens")
        method = pm.Normal("method_effect", lens[lens_of_method], tau["method"], dims="method")
        theta = pm.Normal("theta", method[method_of], tau["candidate"], dims="candidate")
        a0 = pm.Normal("a0", 0.0, pr.a_sigma)
        b0 = pm.Normal("b0", pr.b_mu, pr.b_sigma)
        s0 = pm.Normal("log_sigma0", pr.log_sigma_mu, pr.log_sigma_sigma)
        a = pm.Normal("a", a0, pr.tau_a.rv("tau_a"), dims="lens")
        b = pm.Normal("b", b0, pr.tau_b.rv("tau_b"), dims="lens")
        sigma = pm.Deterministic("sigma", pt.exp(pm.Normal(
            "log_sigma", s0, pr.tau_log_sigma.rv("tau_log_sigma"), dims="lens")), dims="lens")
        lo = fit.lens_of
        theta_sim = pm.Normal("theta_sim", a[lo] + b[lo] * theta, sigma[lo], dims="candidate")
        for dom, gain in (("real", theta), ("sim", theta_sim)):
            eta = pm.Normal(f"eta_{dom}", pr.baseline_mu, pr.baseline_sigma, dims="policy_slot")
            pm.Binomial(f"{dom}_ctrl_obs", n=arrays[f"{dom}_ctrl_n"], logit_p=eta,
                        observed=arrays[f"{dom}_ctrl_k"], dims="policy_slot")
            pm.Binomial(f"{dom}_trt_obs", n=arrays[f"{dom}_trt_n"],
                        logit_p=eta[:, None] + gain[None, :], observed=arrays[f"{dom}_trt_k"],
                        dims=("policy_slot", "candidate"))
    return SBCCase(
        name, gen, fit._compiled(), design,
        {f"{dom}_{arm}_obs": f"{dom}_{arm}_k" for dom in ("real", "sim")
         for arm in ("ctrl", "trt")},
        {"a0": ("a0", {}), "b0": ("b0", {}), "log_sigma0": ("log_sigma0", {}),
         "tau_candidate": ("tau_candidate", {}), "theta[dat0]": ("theta", {"candidate": "dat0"}),
         "theta[dat2]": ("theta", {"candidate": "dat2"}),
         "theta_sim[dat2]": ("theta_sim", {"candidate": "dat2"})},
        target_accept=TARGET_ACCEPT, refresh=refresh,
        description=f"9 adaptations, 3 lenses × (2 + 1 methods), one policy; real trials per "
                    f"arm {n_calib} (6 calibration candidates) and {n_target} (3 targets), "
                    f"{n_sim} sim trials per arm for all; generated level by level and centred, "
                    "fitted by the production model")


# -- registry --------------------------------------------------------------------------------
MISSPECIFIED_SCALE = {m.name: m.sbc_scale for m in MODELS if m.sbc is not None}
"""The prior scale each model's mis-specified variant changes (in the *fitting* model only):
the registry's ``sbc_scale`` of every model with an SBC case (:data:`models.registry.MODELS`)."""


def model_case(model: str, *, scale: str | None = None, factor: float = 1.0,
               **kwargs: Any) -> SBCCase:
    """The SBC case of ``model`` (a key of :data:`MISSPECIFIED_SCALE`), optionally mis-specified.

    Data are simulated from the model's default priors; with ``factor`` ≠ 1 the fitting model's
    prior ``scale`` (default ``MISSPECIFIED_SCALE[model]``) is multiplied by ``factor``
    (e.g. 0.25: four times too narrow).  ``kwargs`` go to the case builder (``family``, ...),
    the registry's ``sbc`` of the model.
    """
    entries = {m.name: m for m in MODELS if m.sbc is not None}
    if model not in entries:
        what = (f"model {model!r} has no SBC case" if model in model_names()
                else f"unknown model {model!r}")
        raise InputError("SBC", f"{what}; known: {sorted(entries)}")
    entry = entries[model]
    builder = entry.sbc_case()
    priors = entry.priors()
    name = model if "family" not in kwargs else f"{model} ({kwargs['family']})"
    if factor == 1.0:
        return builder(priors, priors, name=name, **kwargs)
    scale = scale or entry.sbc_scale
    label = f"÷ {1 / factor:g}" if factor < 1 else f"× {factor:g}"
    return builder(priors, scaled_priors(priors, scale, factor),
                   name=f"{name}, fit {scale} {label}", **kwargs)
