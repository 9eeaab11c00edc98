"""The fitted belief: q_t with its posteriors, evidence, candidates and settings, and its decision.

Budget of :meth:`FittedBelief.decide` (``budget=None``)
    The candidate file's ``[budget]`` minus the realised costs, an overspent resource
    clamped at 0 as a campaign clamps it after an overrun
    (:func:`belief.inputs.costs.remaining_budget`; ``budget_source`` says so).
    Candidates executed so far (the ``costs`` rows; without them, the paired evaluations and
    the sources of gain estimates) leave the candidate set unless repeatable.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

import belief as _pkg
from belief.errors import InputError
from belief.files import dataset_digest, jsonable
from belief.inputs.candidate_file import CandidateFile
from belief.inputs.candidates import CandidateSet
from belief.inputs.costs import executed_actions, remaining_budget
from belief.inputs.evidence import Evidence
from belief.inputs.evidence_dir import EvidenceTables
from belief.inputs.resources import make_budget, parse_budget
from belief.workflow.derived import Derived, compute_derived, judge_models, to_file

if TYPE_CHECKING:  # the decision layer is imported when a decision is taken
    from belief.decision.settings import DecisionSettings
    from belief.decision.weights import WeightRule


__all__ = ["DECIDE_CHANGES", "DerivedMissingWarning", "FittedBelief", "dataset_table",
           "netcdf_tree", "posterior_convergence"]


class DerivedMissingWarning(UserWarning):
    """A belief file without stored diagnostics: they are recomputed from its draws."""


def _table_ds(df: pd.DataFrame) -> xr.Dataset:
    data = {}
    for col in df.columns:
        values = df[col].to_numpy()
        if values.dtype == object or pd.api.types.is_string_dtype(df[col].dtype):
            values = np.array([str(v) for v in values], dtype=str) if len(values) \
                else np.array([], dtype=str)
        data[str(col)] = ("row", values)
    return xr.Dataset(data, coords={"row": np.arange(len(df))})


def dataset_table(ds: xr.Dataset) -> pd.DataFrame:
    return pd.DataFrame({name: ds[name].values for name in ds.data_vars})


def netcdf_tree(tree: xr.DataTree) -> xr.DataTree:
    """The tree as netCDF stores it (object variables, e.g. nutpie's ``divergence_message``
    of ``None``s, become strings), so that a saved and reloaded fit is identical to this one."""
    from belief.files import netcdf_ready

    return xr.DataTree.from_dict({node.path: netcdf_ready(node.to_dataset(inherit=False))
                                  for node in tree.subtree})


DECIDE_CHANGES: dict[str, Any] = {
    "functional": "mean", "beta": 1.0, "alpha_exec": 0.1, "delta": 0.05,
    "safety_method": "anytime", "cvu_outcomes": 256, "horizon": None,
    "stability_resamples": 200, "continuation": "one_step", "rollout_depth": 2,
    "cvu_estimator": "auto", "refit_scope": "decisive", "inner_outcomes": 32, "max_refits": 16}
"""The settings :meth:`FittedBelief.decide` takes as keyword changes, with their defaults
(the names of :func:`belief.decision.settings.settings_from_options`)."""


def _with_effort(settings: Any, effort: str, changes: Mapping[str, Any],
                 refit: bool | None) -> tuple[Any, bool | None]:
    """``settings`` with CVU at effort level ``effort`` under the CVU fields that ``changes``
    give explicitly (:data:`belief.decision.settings.OPTIONS` says which option is which
    field), and the refits (``refit`` when given, else the level's):
    :meth:`belief.decision.settings.CVUSettings.at_effort`."""
    from dataclasses import replace

    from belief.decision.settings import OPTIONS

    fields = [OPTIONS[k][1] for k in changes if k in OPTIONS and OPTIONS[k][0] == "cvu"]
    cvu, level_refit = settings.cvu.at_effort(
        effort, {f: getattr(settings.cvu, f) for f in fields})
    return replace(settings, cvu=cvu), (level_refit if refit is None else refit)


@dataclass
class FittedBelief:
    """A fitted belief q_t with its posteriors, evidence, candidates and settings.

    Attributes
    ----------
    belief : Dataset
        q_t (:func:`belief.posterior.belief_state.make_belief`), joint draws over (``sample``,
        ``candidate``).
    idata : DataTree
        One child per fitted model (``gains``, ``exec_risk``, ``transfer``, ``sensitivity``),
        each with ``posterior``, ``sample_stats``, ... (ArviZ-ready).  A loaded belief reads
        it from its file on first access.
    candidates : CandidateFile
        The candidate set, its text and default weights.
    tables : EvidenceTables
        The validated evidence and realised costs.
    settings : dict
        Fit settings (stored as JSON in the file; see :mod:`belief.workflow.belief_file`).
    path : Path or None
        The file it was loaded from or last saved to.

    What the draws give once — the convergence diagnostics and the sensitivity reports
    (:class:`belief.workflow.derived.Derived`) — is computed on first use or when saved, and
    read from the file when it holds them.
    """

    belief: xr.Dataset
    _idata: xr.DataTree | None
    candidates: CandidateFile
    tables: EvidenceTables
    settings: dict[str, Any]
    path: Path | None = None
    _load_idata: Callable[[], xr.DataTree] | None = field(default=None, repr=False)
    _derived: Derived | None = field(default=None, repr=False)

    # -- properties ---------------------------------------------------------------------------
    @property
    def idata(self) -> xr.DataTree:
        """The posteriors (read from the file on first use when the belief was loaded)."""
        if self._idata is None:
            self._idata = self._load_idata() if self._load_idata is not None else xr.DataTree()
        return self._idata

    @property
    def derived(self) -> Derived:
        """Convergence diagnostics and sensitivity reports of the draws: the file's when it holds
        them, else computed from the draws (once; a file without them says so in a
        :class:`DerivedMissingWarning`)."""
        if self._derived is None:
            if self._load_idata is not None:  # read from a file that does not hold them
                import warnings

                warnings.warn(f"{self.path} holds no stored diagnostics (written before they "
                              "were stored): recomputing them from its draws; save the belief "
                              "again (or re-fit) to store them", DerivedMissingWarning,
                              stacklevel=2)
            self._derived = compute_derived(self.idata, self.settings)
        return self._derived

    def recompute_derived(self) -> Derived:
        """The diagnostics and reports computed afresh from the draws (never the stored ones)."""
        return compute_derived(self.idata, self.settings)

    @property
    def candidate_set(self) -> CandidateSet:
        return self.candidates.candidates

    @property
    def evidence(self) -> Evidence:
        return self.tables.evidence

    @property
    def costs(self) -> pd.DataFrame:
        return self.tables.costs

    @property
    def policy(self) -> str:
        return str(self.belief.attrs["policy"])

    @property
    def step(self) -> int:
        return int(self.belief.attrs["step"])

    @property
    def reliable(self) -> bool:
        return bool(int(self.belief.attrs.get("reliable", 1)))

    @property
    def models(self) -> list[str]:
        if self._idata is None and "models" in self.settings:
            return list(self.settings["models"])
        return list(self.idata.children)

    def provenance(self) -> dict[str, Any]:
        """How this belief was made, for a report's header: ``belief_version``, ``chains``,
        ``draws``, ``tune``, ``seed``, ``evidence_source`` and ``evidence_rows`` (rows per
        evidence table).

        Read from the fit settings (``belief fit``), else from q_t's attributes (the sampler
        settings and seed every :meth:`belief.posterior.fitter.BeliefFitter.fit` records;
        ``evidence_source`` a campaign records), else None: not recorded (a file written
        before they were).  The version is the settings' or this package's (a belief file of
        another version is refused on load); the rows are those of the stored evidence."""
        s, a = self.settings, self.belief.attrs

        def pick(key: str, attr: str) -> Any:
            value = s.get(key, a.get(attr))
            if value is None:
                return None
            return str(value) if key == "evidence_source" else int(value)

        return {"belief_version": str(s.get("belief_version", _pkg.__version__)),
                "chains": pick("chains", "fit_chains"), "draws": pick("draws", "fit_draws"),
                "tune": pick("tune", "fit_tune"), "seed": pick("seed", "fit_seed"),
                "evidence_source": pick("evidence_source", "evidence_source"),
                "evidence_rows": {k: int(v) for k, v in self.tables.rows().items()}}

    def history(self) -> list[str]:
        """Candidates executed so far, in step order (see the module docstring)."""
        return executed_actions(self.costs, self.evidence.paired, self.evidence.gain_estimates,
                                costs_complete=self.tables.costs_complete)

    def available(self) -> tuple[str, ...]:
        """Candidates still available: executed non-repeatable ones leave the set."""
        done = set(self.history())
        return tuple(c.id for c in self.candidate_set if c.repeatable or c.id not in done)

    # -- persistence ----------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write everything to ``path`` (netCDF, atomically);
        :func:`belief.workflow.belief_file.load` reads it back."""
        from belief.workflow.netcdf_store import save_belief

        groups = {f"evidence/{name}": _table_ds(df)
                  for name, df in self.evidence.tables().items()}
        groups["evidence/costs"] = _table_ds(self.costs)
        attrs = {"candidates_toml": self.candidates.text,
                 "candidates_sha256": self.candidates.sha256,
                 "candidates_source": self.candidates.source,
                 "costs_complete": "1" if self.tables.costs_complete else "0"}
        if self.settings:  # a belief fitted here; one loaded from a bare file has none
            attrs["settings"] = json.dumps(jsonable(self.settings), sort_keys=True)
        attrs["derived"], derived_groups = to_file(self.derived)
        groups.update(derived_groups)
        path = save_belief(path, self.belief, self.idata, groups=groups, attrs=attrs)
        self.path = Path(path)
        return self.path

    # -- diagnostics ----------------------------------------------------------------------------
    def convergence(self, rhat_max: float | None = None, ess_min: float | None = None,
                    max_divergences: int = 0) -> pd.DataFrame:
        """R-hat, bulk/tail ESS and divergences of every fitted model, per checked variable.

        Thresholds default to the fit's settings (R-hat ≤ 1.01, bulk and tail ESS ≥ 400).

        Returns
        -------
        DataFrame
            Index (``model``, ``variable``); columns of
            :func:`belief.posterior.diagnostics.convergence_table`; ``attrs`` hold the
            thresholds and ``escalations`` (model → what the fit tried after a failing first
            attempt, from the belief's ``<model>_escalation``).
        """
        table = judge_models(self.derived.convergence, self.settings, rhat_max, ess_min,
                             max_divergences, label=str(self.path or "belief"))
        models = table.index.get_level_values("model").unique()
        table.attrs["escalations"] = {
            m: str(self.belief.attrs.get(f"{m}_escalation", "none")) for m in models}
        return table

    # -- decisions ------------------------------------------------------------------------------
    def budget(self, budget: str | Mapping[str, float] | xr.DataArray | None = None
               ) -> tuple[xr.DataArray, str]:
        """The budget b_t and where it came from (explicit, or ``[budget]`` − realised costs)."""
        cs = self.candidate_set
        if budget is None:
            b = remaining_budget(cs, self.costs, source=self.candidates.source)
            spent = ", ".join(f"{r}={float(self.costs[r].sum()):g}" for r in cs.resources)
            over = b.attrs.get("overspent")
            return b, (f"[budget] of {Path(self.candidates.source).name} minus realised costs "
                       f"({spent}; {len(self.costs)} cost rows)"
                       + (f"; overrun, clamped at 0 as in the campaign: {over}" if over
                          else ""))
        if isinstance(budget, str):
            return parse_budget(budget, cs.resources), "--budget"
        if isinstance(budget, xr.DataArray):
            budget = {str(r): float(v) for r, v in zip(budget["resource"].values,
                                                        budget.values, strict=True)}
        return make_budget(budget, cs.resources, table="budget"), "given"

    def weights(self, weights: str | Mapping[str, float] | WeightRule | None = None
                ) -> tuple[WeightRule, str]:
        """The λ rule and where it came from (explicit, or the candidate file's
        ``[weights]``)."""
        from belief.decision.weights import FixedWeights, as_weight_rule

        cs = self.candidate_set
        if weights is None:
            if self.candidates.weights is None:
                raise InputError("--weights", "no resource weights: pass --weights "
                                              + ",".join(f"{r}=…" for r in cs.resources)
                                              + " or add [weights] to the candidate file")
            return FixedWeights(self.candidates.weights), (
                f"[weights] of {Path(self.candidates.source).name}")
        if isinstance(weights, str):
            return FixedWeights.parse(weights), "--weights"
        return as_weight_rule(weights), "given"

    def decide(self, settings: DecisionSettings | None = None, *,
               budget: str | Mapping[str, float] | xr.DataArray | None = None,
               weights: str | Mapping[str, float] | WeightRule | None = None,
               refit: bool | None = None, seed: int = 0,
               on_feasibility: Callable[[xr.Dataset], None] | None = None,
               effort: str | None = None, **changes: Any) -> xr.Dataset:
        """The decision at the fitted state: :func:`belief.decision.engine.decide` with CVU.

        The decision's settings come one way or the other: ``settings`` (a
        :class:`~belief.decision.settings.DecisionSettings` built by the caller, as the CLI
        does), or keyword ``changes`` to the defaults below, from which one is built
        (:func:`belief.decision.settings.settings_from_options`).  Both at once are refused
        (:class:`InputError` naming ``settings`` and the changes); an unknown change is a
        ``TypeError`` listing the accepted names (:data:`DECIDE_CHANGES`).

        Parameters
        ----------
        settings : DecisionSettings, optional
            The decision's settings; ``settings.weights = None`` means ``weights`` or the
            candidate file's ``[weights]``.
        budget : str, mapping or DataArray, optional
            b_t (``"real_h=10,compute=200,eng_h=15"``); default ``[budget]`` − realised costs.
        weights : str, mapping or WeightRule, optional
            λ; default the candidate file's ``[weights]``.
        refit : bool, optional
            Exact refits where PSIS k̂ is above the sample-size threshold
            min(1 − 1/log10 S, 0.7) (re-samples the gains model on the stored evidence;
            compiles it once per process).  Without it CVU is importance-weighted only and the
            decision says so (``cvu_refits`` attribute).  Default: the ``effort`` level's
            (``thorough`` refits), otherwise no refits.
        seed : int
            Seeds CVU and the decision-stability bootstrap.
        on_feasibility : callable Dataset → None, optional
            Called with the feasible set and the gate before CVU is computed
            (:func:`belief.decision.engine.gate_view`).
        effort : {"fast", "default", "thorough"}, optional
            CVU's effort level, as ``--effort`` (:data:`belief.decision.settings.EFFORTS`,
            :meth:`~belief.decision.settings.CVUSettings.for_effort`): its preset of outcomes,
            continuation, inner outcomes, split by channel and refits, under the CVU changes
            given explicitly (``cvu_outcomes``, ``continuation``, …, which win).  A change, so
            refused together with ``settings``.
        **changes
            Without ``settings``: any of the following (defaults in :data:`DECIDE_CHANGES`).
        functional : str
            φ: a registered functional (``mean``, ``lcb:Q``, ``cvar:A``, ``entropic:θ``, …;
            :mod:`belief.decision.functional_registry`).
        beta : float
            β in Q = U0 + β·CVU (0: myopic, CVU not computed).
        alpha_exec, delta, safety_method
            The execution-safety gate (:class:`belief.decision.safety.SafetyGate`).
        cvu_outcomes : int
            Simulated outcomes per candidate in CVU.
        refit_scope : {"decisive", "all"}
            With ``refit``: refit only as many candidates as settle the choice (the others'
            untrusted outcomes bounded), or every candidate
            (:class:`belief.decision.settings.CVUSettings` ``refit_scope``).
        max_refits : int
            With ``refit``: at most this many exact refits per candidate, the outcomes with
            the largest k̂ first (default 16; ``CVUSettings.max_refits``).
        horizon : int, optional
            T; at the last step (step ≥ T − 1) CVU := 0.
        stability_resamples : int
            Bootstrap replicates of Pr(argmax flips) (0 skips it).
        continuation, rollout_depth, inner_outcomes
            CVU's continuation: ``one_step`` (G0), ``lookahead2`` or ``rollout`` of depth
            ``rollout_depth``, with ``inner_outcomes`` second-step outcomes (``lookahead2``) or
            greedy paths (``rollout``) per first outcome
            (:class:`belief.decision.settings.CVUSettings`).
        cvu_estimator : {"auto", "psis", "regression"}
            CVU's estimator: ``auto`` (PSIS while the weights can be trusted, regression for
            informative studies), or one forced for every candidate
            (:class:`belief.decision.settings.CVUSettings` ``estimator``).  With a look-ahead or
            rollout, ``regression`` gives the nested-regression continuation
            (:mod:`belief.decision.cvu.lookahead_regression`), several times faster than the
            weighted one.

        Returns
        -------
        Dataset over ``candidate`` (see :func:`belief.decision.engine.decide`), with attributes
        ``budget_source``, ``weights_source``, ``cvu_refits``, ``history``,
        ``candidates_sha256``, ``belief_sha256`` (:func:`belief.files.dataset_digest` of q_t:
        which belief the decision came from) and ``belief_file`` added.
        """
        from belief.decision.engine import decide
        from belief.decision.settings import settings_from_options
        from belief.decision.state import State

        unknown = sorted(set(changes) - set(DECIDE_CHANGES))
        if unknown:
            raise TypeError(f"decide() got unexpected keyword argument(s) {unknown}; the "
                            f"settings it accepts as changes: {', '.join(DECIDE_CHANGES)}")
        if settings is not None and (changes or effort is not None):
            given = [*changes, *(["effort"] if effort is not None else [])]
            raise InputError("settings", "give the decision's settings either as settings= or "
                                         "as changes (" + ", ".join(f"{k}=" for k in given)
                             + "), not both: settings.replace(...) changes a settings object")
        if settings is None:
            rule, w_source = self.weights(weights)
            settings = settings_from_options(weights=rule, **{**DECIDE_CHANGES, **changes})
            if effort is not None:
                settings, refit = _with_effort(settings, effort, changes, refit)
        elif settings.weights is None:  # λ from ``weights`` or the candidate file
            rule, w_source = self.weights(weights)
            settings = settings.with_weights(rule)
        elif weights is not None:
            raise InputError("weights", "give λ either in the settings or as weights=, not both")
        else:
            w_source = "given"
        refit = bool(refit)

        if settings.horizon is not None and settings.horizon <= self.step:
            raise InputError("--horizon", f"the horizon must be > the current step "
                                          f"{self.step}, got {settings.horizon}")
        b, b_source = self.budget(budget)
        state = State(step=self.step, budget=b, policy=self.policy, belief=self.belief,
                      history=tuple(self.history()), available=self.available())
        refit_fn = None
        if settings.beta == 0:
            refits = "CVU not computed (β = 0)"
        elif settings.is_terminal(self.step):
            refits = "terminal step: CVU := 0"
        elif refit and settings.cvu.max_refits == 0:
            refits = "no exact refits (--max-refits 0): CVU by PSIS reweighting only"
        elif refit:
            from belief.posterior.refit import exact_refit

            refit_fn = exact_refit(self._fitter(), self.evidence, state, settings.cvu.trials,
                                   seed, settings.cvu.refit_draws)
            refits = (f"exact refits where PSIS k̂ > {settings.cvu.k_threshold:g}, at most "
                      f"{settings.cvu.max_refits} per candidate (on the evidence stored in the "
                      "file"
                      + ("; only as many as settle the choice, the others' outcomes bounded)"
                         if settings.cvu.decisive_refits else ")"))
        else:
            refits = ("no exact refits: CVU by PSIS reweighting only (deciding from a saved "
                      "belief; pass --refit to re-sample the gains model where k̂ is too large)")
        decision = decide(state, self.candidate_set, settings, seed=seed, refit=refit_fn,
                          on_feasibility=on_feasibility)
        estimated = decision.attrs["cvu_status"].startswith("estimated")
        decision.attrs.update({
            "budget_source": b_source, "weights_source": w_source, "cvu_refits": refits,
            "history": ", ".join(state.history), "candidates_sha256": self.candidates.sha256,
            "belief_sha256": dataset_digest(self.belief),
            "belief_file": str(self.path or ""), "belief_version": _pkg.__version__,
            "cvu_outcomes": settings.cvu.n_outcomes if estimated else 0, "seed": int(seed),
            "cvu_continuation": settings.cvu.continuation if estimated else "none",
            "cvu_rollout_depth": settings.cvu.rollout_depth,
            "cvu_estimator": settings.cvu.estimator if estimated else "none"})
        return decision

    def _fitter(self):
        from belief.posterior.fitter import BeliefFitter, FitSettings
        from belief.posterior.registry import stored_priors

        s = self.settings
        if not s:
            raise InputError(str(self.path or "belief"), "no fit settings stored: exact refits "
                                                         "need a belief written by belief fit")
        if s.get("past_campaigns"):
            raise InputError("--refit", "the belief was fitted with past campaigns (belief fit "
                                        "--past), which the belief file does not hold: exact "
                                        "refits are not supported; decide without --refit")
        pri = s["priors"]
        return BeliefFitter.from_priors(
            self.candidate_set,
            FitSettings(draws=int(s["draws"]), tune=int(s["tune"]), chains=int(s["chains"]),
                        max_policies=int(s["max_policies"]), rhat_max=float(s["rhat_max"]),
                        ess_min=float(s["ess_min"]), costs=bool(s.get("costs", False))),
            stored_priors(pri))

    # -- reports ---------------------------------------------------------------------------------
    def sensitivity_reports(self) -> dict[str, Any]:
        """One :class:`belief.posterior.sensitivity.SensitivityReport` per policy with
        sensitivity runs."""
        return dict(self.derived.sensitivity)

    def deployment_check(self, alpha_deploy: float = 0.05, delta: float = 0.05,
                         method: str = "clopper_pearson") -> xr.Dataset:
        """P_deploy(unsafe | π_t) ≤ α_deploy on the current policy (deployment evidence only)."""
        from belief.decision.safety import deployment_check

        return deployment_check(self.evidence, self.policy, alpha_deploy, delta, method)

    def exec_risk_summary(self, interval: float = 0.9, seed: int = 0) -> pd.DataFrame:
        """P_exec(unsafe) on the probability scale: per hardware candidate and for the
        population (empty without an execution-risk fit).

        Candidate rows: executions n, unsafe k, the posterior mean and central ``interval`` of
        p_unsafe, and the exact two-sided Clopper–Pearson interval at the same level.
        Population rows (:func:`models.exec_risk.population_risk`): the typical candidate
        logit⁻¹(μ_0), a new candidate on each hardware group, and a new candidate on new
        hardware (posterior-predictive; no counts).
        """
        from belief.decision.safety import clopper_pearson_interval
        from belief.posterior.registry import population_risk

        if "exec_risk" not in self.idata.children:
            return pd.DataFrame()
        node = self.idata["exec_risk"]
        lo, hi = (1 - interval) / 2, 1 - (1 - interval) / 2
        label_lo, label_hi = f"q{100 * lo:g}", f"q{100 * hi:g}"
        rows = []
        p = node["posterior"]["p_unsafe"]
        n = node["constant_data"]["executions"].values
        k = node["observed_data"]["unsafe"].values
        cp_lo, cp_hi = clopper_pearson_interval(k, n, interval)
        for i, cid in enumerate(p["candidate"].values):
            draws = p.sel(candidate=cid).values.ravel()
            rows.append({"level": "candidate", "name": str(cid), "executions": int(n[i]),
                         "unsafe": int(k[i]), "mean": float(draws.mean()),
                         label_lo: float(np.quantile(draws, lo)),
                         label_hi: float(np.quantile(draws, hi)),
                         "CP low": float(cp_lo[i]), "CP high": float(cp_hi[i])})
        pop = population_risk(node, seed)
        named = [("typical candidate: logit⁻¹(μ_0)", pop["p_typical"].values)]
        named += [(f"new candidate on {g}", pop["p_new_candidate"].sel(hw_group=g).values)
                  for g in pop["hw_group"].values]
        named.append(("new candidate on new hardware", pop["p_new_group"].values))
        for name, draws in named:
            rows.append({"level": "population", "name": name, "mean": float(draws.mean()),
                         label_lo: float(np.quantile(draws, lo)),
                         label_hi: float(np.quantile(draws, hi))})
        return pd.DataFrame(rows).set_index(["level", "name"])

    def gains_summary(self, interval: float = 0.9) -> pd.DataFrame:
        """Posterior-predictive gain per candidate: mean, s.d., interval, P(ΔJ > 0), and
        ``own_share`` — the share of the candidate's posterior that comes from its own evidence
        rather than from the pooled levels (:func:`models.gains.own_evidence_share`:
        1 − Var_post(ε_m)/E_post[σ_m²]; NaN for candidates outside the gains model), and
        ``history`` — Σ_{a ∈ h} γ_{a→m}, the posterior-mean order effect (logit) of what ran
        before on this candidate's next gain (with order effects), and with simulated paired
        evaluations ``sim_share`` — how much of the candidate's belief about its real gain
        comes from simulation, 1 − Var(θ_m | real, sim) / Var(θ_m | real) under the sim-proxy
        model (:func:`models.sim_proxy.sim_share`; NaN for candidates without a gain)."""
        g = self.belief["gain"]
        lo, hi = (1 - interval) / 2, 1 - (1 - interval) / 2
        qs = g.quantile([lo, 0.5, hi], "sample")
        out = pd.DataFrame({
            "role": self.belief["role"].values.astype(str),
            "mean": g.mean("sample").values, "sd": g.std("sample").values,
            f"q{100 * lo:g}": qs.sel(quantile=lo).values,
            "median": qs.sel(quantile=0.5).values,
            f"q{100 * hi:g}": qs.sel(quantile=hi).values,
            "p_positive": (g > 0).mean("sample").values},
            index=pd.Index(self.belief["candidate"].values.astype(str), name="candidate"))
        if "own_evidence_share" in self.belief:  # older belief files lack it
            out["own_share"] = self.belief["own_evidence_share"].values
        if "sim_proxy_sim_share" in self.belief:  # with simulated paired evaluations
            out["sim_share"] = self.belief["sim_proxy_sim_share"].values
        if "gains_offset" in self.belief:  # order effects of the history (logit scale)
            out["history"] = np.where(self.belief["changes_policy"].values,
                                      self.belief["gains_offset"].mean("sample").values, np.nan)
        return out

    def order_effects(self, interval: float = 0.9) -> pd.DataFrame:
        """Every order effect γ_{a→m} of the belief: mean, s.d., interval, Pr(γ > 0), stated
        prior, evidence and kind (:func:`belief.posterior.order_effects.order_effects_table`;
        empty without order effects)."""
        from belief.posterior.order_effects import order_effects_table

        return order_effects_table(self.belief, interval)


def posterior_convergence(idata: xr.DataTree, settings: Mapping[str, Any] | None = None,
                          rhat_max: float | None = None, ess_min: float | None = None,
                          max_divergences: int = 0, label: str = "belief") -> pd.DataFrame:
    """Convergence table of every model in ``idata`` (see :meth:`FittedBelief.convergence`),
    computed from its draws.

    Default thresholds: the fit's settings; without them R-hat ≤ 1.01 and ESS ≥ 400 (the rule
    of :class:`belief.posterior.fitter.FitSettings`):
    :func:`belief.workflow.derived.judge_models` of
    :func:`belief.workflow.derived.posterior_diagnostics`.
    """
    from belief.workflow.derived import posterior_diagnostics

    return judge_models(posterior_diagnostics(idata), settings, rhat_max, ess_min,
                        max_divergences, label)
