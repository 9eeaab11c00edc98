"""The decision Dataset's schema, declared once: every variable and attribute, its meaning,
units, dimensions and type.

:func:`belief.decision.engine.decide` returns an ``xarray.Dataset`` over ``candidate``; its
callers add attributes of their own (:meth:`belief.workflow.fitted.FittedBelief.decide`, the
campaign loop, replay, :func:`belief.decision.decision_file.save_decision`).  This module lists
all of them, in the order the engine writes them (the column order of ``decision.csv``):

* :data:`VARIABLES` — one :class:`Variable` per data variable, over ``candidate``;
* :data:`ATTRIBUTES` — one :class:`Attribute` per attribute, with the code that sets it;
* :data:`COORDS` — the coordinates.

A name with ``{resource}`` is a family: one member per resource of the candidate set
(``cost_{resource}`` gives ``cost_real_h``, ``cost_compute``, …).  A declaration whose
``when`` is empty is always present; otherwise ``when`` says when it is.

Code reads the names from :class:`Vars` and :class:`Attrs` (``decision[Vars.phi_gain]``,
``decision.attrs[Attrs.chosen]``) and the families from :func:`per_resource`; an undeclared name
is an ``AttributeError`` at the line that uses it, not a ``KeyError`` later.
:func:`check_decision` checks a Dataset against the schema (the engine checks its own output;
``tests/test_decision_schema.py`` checks real decisions of every kind), and
:func:`reference_markdown` writes the documentation's reference page from it.

Units: ``J`` is the evaluation metric's scale (ΔJ, φ(ΔJ), U0, CVU, Q are differences of J,
for a binary success criterion a difference of success rates); C_λ = λᵀΔC is on the same scale
(λ converts each resource into J); a cost is in its resource's own unit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by the command line's tables: no numpy or xarray at import
    import xarray as xr

__all__ = ["ATTRIBUTES", "COORDS", "FROM_CVU", "LABELS", "RESOURCE", "TABLE_COLUMNS",
           "VARIABLES", "Attribute", "Attrs", "Variable", "Vars", "check_decision",
           "member_resources", "members", "per_resource", "reference_markdown",
           "schema_problems", "table_columns"]

RESOURCE = "{resource}"
"""The placeholder of a per-resource family's name."""

_KINDS = {"float": "f", "int": "iu", "bool": "b", "str": "OUS"}
"""A declared type → the numpy dtype kinds that hold it (text: object or fixed-width)."""


class _Declared:
    """What a variable and an attribute declaration share: a family (one member per resource,
    its name holding ``{resource}``) and optional presence (a non-empty ``when``)."""

    name: str
    when: str

    @property
    def family(self) -> bool:
        """One member per resource."""
        return RESOURCE in self.name

    @property
    def optional(self) -> bool:
        """Present only ``when`` (not always)."""
        return bool(self.when)


@dataclass(frozen=True)
class Variable(_Declared):
    """One data variable of the decision.

    Attributes
    ----------
    name : str
        Its name (a family's holds ``{resource}``).
    meaning : str
        What it is, with its formula.
    units : str
        Its unit or scale (``J``, ``probability``, a resource's unit, ``count``, ``text``, …).
    dtype : {"float", "int", "bool", "str"}
    when : str
        When it is present (empty: always).
    dims : tuple of str
    from_cvu : bool
        Copied from CVU's own Dataset (:func:`belief.decision.cvu.cvu_for_state`, or a CVU
        given to :func:`belief.decision.engine.decide`) when it holds it.
    """

    name: str
    meaning: str
    units: str
    dtype: str
    when: str = ""
    dims: tuple[str, ...] = ("candidate",)
    from_cvu: bool = False


@dataclass(frozen=True)
class Attribute(_Declared):
    """One attribute of the decision.

    Attributes
    ----------
    name, meaning, units, dtype, when
        As for :class:`Variable` (``dtype`` of the value: ``float``, ``int`` — 0/1 for a
        flag —, ``str``).
    set_by : str
        The code that sets it: ``decide`` (the engine), ``FittedBelief.decide``, ``campaign``
        (the loop and replay), ``save_decision`` (the file).
    """

    name: str
    meaning: str
    units: str
    dtype: str
    when: str = ""
    set_by: str = "decide"


_variables: list[Variable] = []
_attributes: list[Attribute] = []


def _var(name: str, meaning: str, units: str, dtype: str, when: str = "", *,
         from_cvu: bool = False) -> str:
    _variables.append(Variable(name, meaning, units, dtype, when, from_cvu=from_cvu))
    return name


def _attr(name: str, meaning: str, units: str, dtype: str, when: str = "", *,
          set_by: str = "decide") -> str:
    _attributes.append(Attribute(name, meaning, units, dtype, when, set_by))
    return name


J = "J"
PROB = "probability"
TEXT = "text"
FLAG = "0/1"
CVU_ = "with CVU (β > 0, not the terminal step)"
COSTS_ = "with cost draws (`belief fit --costs`)"
SPLIT_ = "with CVU and its channel split"
AHEAD_ = "with CVU and a non-myopic continuation (`--continuation lookahead2` or `rollout`)"
TRANSFER_ = "when q_t holds transfer draws of the current policy"


class Vars:
    """The decision's variable names, in the engine's order (declared with their meaning)."""

    phi_gain = _var("phi_gain", "φ(ΔJ(m)): the decision functional of the gain draws (mean, "
                    "lcb:q, cvar:a, entropic:θ)", J, "float")
    c_lambda = _var("c_lambda", "C_λ(m) = λ_tᵀ ΔC(m) (with cost draws E[λ_tᵀ ΔC(m)])", J,
                    "float")
    u0 = _var("u0", "U0(m) = φ(ΔJ(m)) − C_λ(m): the net utility of doing m now", J, "float")
    mv = _var("mv", "MV(m) = φ(ΔJ(m)) / C_λ(m): efficiency (a reading only; NaN when C_λ = 0)",
              "ratio", "float")
    mv_reason = _var("mv_reason", "why MV is undefined or uninformative (empty otherwise)", TEXT,
                     "str")
    cvu = _var("cvu", "CVU(m) = E_Y[G0(s^{m,Y})] − G0(s^∅): the continuation value of m's "
               "outcome (0 without CVU; NaN when it could not be estimated)", J, "float")
    q = _var("q", "Q(m) = U0(m) + β·CVU(m): the score m* maximises", J, "float")
    value_vs_stop = _var("value_vs_stop", "U0(m) + β·E_Y[G0(s^{m,Y})] = Q(m) + β·G0(s^∅): "
                         "doing m now and continuing, against stopping (worth 0)", J, "float")
    cost = _var("cost_{resource}", "ΔC_r(m): the candidate file's cost of m (with cost draws "
                "E[ΔC_r(m)] under the cost posterior)", "the resource's unit", "float")
    available = _var("available", "m is in the candidate set (not executed, or repeatable)",
                     "", "bool")
    budget_ok = _var("budget_ok", "m ∈ M^budget: ΔC(m) ≤ b_t (with cost draws Pr(ΔC_r(m) > "
                     "b_t,r) ≤ ε_budget for every resource)", "", "bool")
    budget_reason = _var("budget_reason", "why m is over budget (empty when it fits)", TEXT,
                         "str")
    safe = _var("safe", "m ∈ M^safe: the deciding upper bound on P_exec(unsafe | m) ≤ α_exec "
                "(always for a candidate that does not drive real hardware)", "", "bool")
    safe_reason = _var("safe_reason", "the safety gate's verdict on m in words", TEXT, "str")
    p_exec_bound = _var("p_exec_bound", "the deciding upper bound on P_exec(unsafe | m) "
                        "(the gate's method)", PROB, "float")
    ucb_anytime = _var("ucb_anytime", "anytime-valid upper confidence bound on P_exec(unsafe "
                       "| m) at level 1 − δ", PROB, "float")
    ucb_clopper_pearson = _var("ucb_clopper_pearson", "one-look Clopper–Pearson upper bound "
                               "on P_exec(unsafe | m) at level 1 − δ", PROB, "float")
    ucb_posterior = _var("ucb_posterior", "posterior 1 − δ quantile of P_exec(unsafe | m) "
                         "(NaN without the execution-risk model)", PROB, "float")
    feasible = _var("feasible", "m ∈ M^feasible = available ∩ M^budget ∩ M^safe", "", "bool")
    chosen = _var("chosen", "m is m*_t, the candidate to do next (none when stopping)", "",
                  "bool")
    excluded_reason = _var("excluded_reason", "why m was not chosen (\"chosen\" for m*)", TEXT,
                           "str")
    lambda_next = _var("lambda_next_{resource}", "λ_{t+1,r} = λ(b_t − ΔC(m))_r: the weight "
                       "after doing m", "J per unit of the resource", "float")
    overrun = _var("overrun_{resource}", "Pr(ΔC_r(m) > b_t,r): the chance that m overruns "
                   "the budget left", PROB, "float", COSTS_)
    cvu_se = _var("cvu_se", "CVU's standard error: the outcomes' Monte Carlo error and the "
                  "error of the finite posterior draws", J, "float", CVU_)
    cvu_mcse = _var("cvu_mcse", "CVU's Monte Carlo error over the simulated outcomes", J,
                    "float", CVU_, from_cvu=True)
    cvu_draws_se = _var("cvu_draws_se", "CVU's error from the finite posterior draws", J,
                        "float", CVU_, from_cvu=True)
    cvu_method = _var("cvu_method", "CVU's estimator (psis, psis+cv, psis+cv+refit, "
                      "regression, regression+ls, no outcome, not computed, failed; "
                      "+bounded when refits were deferred)", TEXT, "str", CVU_, from_cvu=True)
    cvu_reason = _var("cvu_reason", "why that estimator (or why CVU failed)", TEXT, "str",
                      CVU_, from_cvu=True)
    pareto_k = _var("pareto_k", "the largest PSIS k̂ over the simulated outcomes (NaN counted "
                    "as ∞)", "Pareto shape", "float", CVU_, from_cvu=True)
    pareto_k_bad = _var("pareto_k_bad", "share of outcomes whose importance weights are not "
                        "trusted (k̂ above the threshold)", "fraction", "float", CVU_, from_cvu=True)
    cvu_ess = _var("cvu_ess", "median effective sample size of the importance weights",
                   "draws", "float", CVU_, from_cvu=True)
    cvu_cv_gain = _var("cvu_cv_gain", "variance reduction of the martingale control variates",
                       "ratio", "float", CVU_, from_cvu=True)
    cvu_noise_bias = _var("cvu_noise_bias", "the mean noise bias of G0 removed by the PSIS or "
                          "regression estimator (NaN for the others)", J, "float", CVU_,
                          from_cvu=True)
    n_refits = _var("n_refits", "simulated outcomes re-fitted exactly (k̂ too large)", "count",
                    "int", CVU_, from_cvu=True)
    n_deferred = _var("n_deferred", "simulated outcomes whose refit was deferred (bounded, "
                      "not run: the candidate could not be chosen)", "count", "int", CVU_,
                      from_cvu=True)
    cvu_low = _var("cvu_low", "lower bound of CVU over what the deferred refits could give",
                   J, "float", CVU_, from_cvu=True)
    cvu_high = _var("cvu_high", "upper bound of CVU over what the deferred refits could give",
                    J, "float", CVU_, from_cvu=True)
    cvu_outcomes = _var("cvu_outcomes", "simulated outcomes Y behind m's CVU", "count", "int",
                        CVU_, from_cvu=True)
    cvu_voi = _var("cvu_voi", "the value of information E_Y[G0(s^{m,Y})] − G0(s̄^m) (one-step "
                   "CVU; NaN otherwise)", J, "float", CVU_, from_cvu=True)
    cvu_continuation = _var("cvu_continuation", "the continuation behind m's CVU (one_step, "
                            "lookahead2(d=2), rollout(d=…))", TEXT, "str", AHEAD_, from_cvu=True)
    cvu_bias_bound = _var("cvu_bias_bound", "bound on the bias of the non-myopic continuation "
                          "(the estimate lies within [−bias_bound − 2·mcse, 2·mcse] of it)", J,
                          "float", AHEAD_, from_cvu=True)
    cvu_inner_bad_share = _var("cvu_inner_bad_share", "share of the continuation's inner "
                               "importance weights that are not trusted", "fraction", "float",
                               AHEAD_, from_cvu=True)
    cvu_safety = _var("cvu_safety", "what the execution-risk channel does for m (\"can open "
                      "X: …\", \"can close X: …\"; empty when the gate of s_t is held fixed)",
                      TEXT, "str", CVU_, from_cvu=True)
    cvu_own = _var("cvu_own", "CVU through m's and its siblings' gains: V_{i} − G0(s^∅)", J,
                   "float", SPLIT_, from_cvu=True)
    cvu_own_mcse = _var("cvu_own_mcse", "Monte Carlo error of cvu_own", J, "float", SPLIT_,
                        from_cvu=True)
    cvu_order = _var("cvu_order", "CVU through the order effects m creates: V_{i,ii} − V_{i}",
                     J, "float", SPLIT_, from_cvu=True)
    cvu_order_mcse = _var("cvu_order_mcse", "Monte Carlo error of cvu_order", J, "float",
                          SPLIT_, from_cvu=True)
    cvu_safety_value = _var("cvu_safety_value", "CVU through the safety gate after m: "
                            "V_{i,ii,iii} − V_{i,ii} (cvu_own + cvu_order + cvu_safety_value = "
                            "CVU)", J, "float", SPLIT_, from_cvu=True)
    cvu_safety_value_mcse = _var("cvu_safety_value_mcse", "Monte Carlo error of "
                                 "cvu_safety_value", J, "float", SPLIT_, from_cvu=True)


class Attrs:
    """The decision's attribute names (declared with their meaning and who sets them)."""

    step = _attr("step", "t: the step of the belief and the decision", "step", "int")
    policy = _attr("policy", "π_t: the current policy", TEXT, "str")
    chosen = _attr("chosen", "m*_t (a candidate id), or \"(stop)\"", TEXT, "str")
    stop = _attr("stop", "1 when the decision is to stop", FLAG, "int")
    stop_reason = _attr("stop_reason", "why it stops (empty when it does not)", TEXT, "str")
    functional = _attr("functional", "φ, as parsed (`mean`, `lcb:0.1`, `cvar:0.2`, "
                       "`entropic:1`)", TEXT, "str")
    beta = _attr("beta", "β: the weight of CVU in Q", "ratio", "float")
    g0_null = _attr("g0_null", "G0(s^∅) = max(0, max_{m feasible} U0(m)); with a non-myopic "
                    "continuation V(s^∅)", J, "float")
    cvu_status = _attr("cvu_status", "estimated, given, not computed (β = 0) or terminal; the "
                       "candidates whose CVU could not be estimated", TEXT, "str")
    weights_rule = _attr("weights_rule", "the λ rule (fixed values or scarcity)", TEXT, "str")
    flip_probability = _attr("flip_probability", "Pr(argmax flips) under a bootstrap of the "
                             "draws and CVU's error (NaN when not computed)", PROB, "float")
    alpha_exec = _attr("alpha_exec", "α_exec: the safety gate's threshold on P_exec(unsafe)",
                       PROB, "float")
    delta = _attr("delta", "δ: the gate's error level (bounds at 1 − δ)", PROB, "float")
    safety_method = _attr("safety_method", "the gate's bound (anytime, clopper_pearson, "
                          "posterior)", TEXT, "str")
    safety_bound = _attr("safety_bound", "the deciding bound's name", TEXT, "str")
    safety_guarantee = _attr("safety_guarantee", "what the bound guarantees (over every look, "
                             "one look, or a credible bound)", TEXT, "str")
    eps_budget = _attr("eps_budget", "ε_budget: the allowed Pr(overrun) per resource", PROB,
                       "float")
    costs = _attr("costs", "\"known\" or \"uncertain (cost posterior draws)\"", TEXT, "str")
    horizon = _attr("horizon", "T (−1: none)", "step", "int")
    reliable = _attr("reliable", "1 when q_t passed its convergence checks", FLAG, "int")
    reliability_reason = _attr("reliability_reason", "why q_t is not reliable (empty when it "
                               "is)", TEXT, "str")
    lambda_ = _attr("lambda_{resource}", "λ_t,r: the resource's weight at s_t",
                    "J per unit of the resource", "float")
    budget = _attr("budget_{resource}", "b_t,r: the budget left", "the resource's unit",
                   "float")
    continuation = _attr("continuation", "the continuation asked for (lookahead2, rollout)",
                         TEXT, "str", AHEAD_)
    continuation_depth = _attr("continuation_depth", "its depth d", "steps", "int", AHEAD_)
    continuation_inner_outcomes = _attr("continuation_inner_outcomes", "second-step outcomes "
                                        "or greedy paths per first outcome", "count", "int",
                                        AHEAD_)
    continuation_used = _attr("continuation_used", "the continuation used (one_step when it "
                              "fell back)", TEXT, "str", AHEAD_)
    continuation_reason = _attr("continuation_reason", "why it fell back (empty otherwise)",
                                TEXT, "str", AHEAD_)
    delta_j_mean = _attr("delta_j_mean", "posterior mean of δ_J = J_real − J_sim of π_t", J,
                         "float", TRANSFER_)
    delta_j_lo90 = _attr("delta_j_lo90", "lower end of δ_J's 90 % equal-tailed interval", J,
                         "float", TRANSFER_)
    delta_j_hi90 = _attr("delta_j_hi90", "upper end of δ_J's 90 % equal-tailed interval", J,
                         "float", TRANSFER_)
    g_j_mean = _attr("g_j_mean", "posterior mean of G_J = |δ_J| of π_t", J, "float", TRANSFER_)
    g_j_lo90 = _attr("g_j_lo90", "lower end of G_J's 90 % equal-tailed interval", J, "float",
                     TRANSFER_)
    g_j_hi90 = _attr("g_j_hi90", "upper end of G_J's 90 % equal-tailed interval", J, "float",
                     TRANSFER_)
    delta_j_source = _attr("delta_j_source", "the sim/real evaluations behind δ_J (or that it "
                           "is a pooled prediction)", TEXT, "str",
                           "when q_t holds transfer draws")
    delta_j_reliable = _attr("delta_j_reliable", "1 when the transfer fit passed its checks",
                             FLAG, "int", TRANSFER_ + " and the fit was checked")
    delta_j_reliability_reason = _attr("delta_j_reliability_reason", "why it did not", TEXT,
                                       "str", TRANSFER_ + " and the fit was checked")
    budget_source = _attr("budget_source", "where b_t came from (the candidate file minus the "
                          "realised costs, or given)", TEXT, "str", set_by="FittedBelief.decide")
    weights_source = _attr("weights_source", "where λ came from", TEXT, "str",
                           set_by="FittedBelief.decide")
    cvu_refits = _attr("cvu_refits", "whether and where CVU refitted the gains model exactly",
                       TEXT, "str", set_by="FittedBelief.decide")
    history = _attr("history", "the candidates executed so far, in order", TEXT, "str",
                    set_by="FittedBelief.decide")
    candidates_sha256 = _attr("candidates_sha256", "digest of the candidate file", "hex",
                              "str", set_by="FittedBelief.decide")
    belief_sha256 = _attr("belief_sha256", "digest of q_t (which belief the decision came "
                          "from)", "hex", "str", set_by="FittedBelief.decide")
    belief_file = _attr("belief_file", "the belief file decided from (empty: in memory)", TEXT,
                        "str", set_by="FittedBelief.decide")
    belief_version = _attr("belief_version", "the package version that decided", TEXT, "str",
                           set_by="FittedBelief.decide, save_decision")
    cvu_outcomes = _attr("cvu_outcomes", "simulated outcomes per candidate asked for (0 when "
                         "CVU was not estimated)", "count", "int", set_by="FittedBelief.decide")
    seed = _attr("seed", "the decision's seed (CVU's outcomes, the stability bootstrap)", "",
                 "int", set_by="FittedBelief.decide, campaign")
    cvu_continuation = _attr("cvu_continuation", "the continuation asked for (none when CVU "
                             "was not estimated)", TEXT, "str", set_by="FittedBelief.decide")
    cvu_rollout_depth = _attr("cvu_rollout_depth", "the rollout depth asked for", "steps",
                              "int", set_by="FittedBelief.decide")
    cvu_estimator = _attr("cvu_estimator", "CVU's estimator asked for (auto, psis, regression; "
                          "none when CVU was not estimated)", TEXT, "str",
                          set_by="FittedBelief.decide")
    q_choice = _attr("q_choice", "argmax Q when another allocation rule (or the refusal to act "
                     "on an unreliable belief) chose", TEXT, "str",
                     "when the pick is not Q's", set_by="campaign")
    allocation = _attr("allocation", "the allocation rule that chose (q: argmax Q)", TEXT,
                       "str", set_by="campaign")
    format = _attr("format", "the decision file's format (belief-decision-1)", TEXT, "str",
                   "in a decision file", set_by="save_decision")


VARIABLES: tuple[Variable, ...] = tuple(_variables)
"""Every variable, in the engine's order (the column order of ``decision.csv``)."""

ATTRIBUTES: tuple[Attribute, ...] = tuple(_attributes)
"""Every attribute."""

LABELS: Mapping[str, str] = {
    Vars.phi_gain: "φ(ΔJ)", Vars.c_lambda: "C_λ", Vars.u0: "U0", Vars.mv: "MV",
    Vars.cvu: "CVU", Vars.cvu_low: "CVU ≥", Vars.cvu_high: "CVU ≤",
    Vars.cvu_mcse: "CVU ± (MCSE)", Vars.cvu_se: "CVU error", Vars.cvu_draws_se: "± draws",
    Vars.cvu_method: "estimator", Vars.cvu_own: "CVU own", Vars.cvu_own_mcse: "± own",
    Vars.cvu_order: "CVU order", Vars.cvu_order_mcse: "± order",
    Vars.cvu_safety_value: "CVU safety", Vars.cvu_safety_value_mcse: "± safety",
    Vars.q: "Q", Vars.value_vs_stop: "vs stop", Vars.p_exec_bound: "P_exec UCB",
    Vars.feasible: "feasible", Vars.chosen: "chosen", Vars.excluded_reason: "reason"}
"""The variables' short labels, as the report's tables show them (the others by name)."""

FROM_CVU: tuple[str, ...] = tuple(v.name for v in VARIABLES if v.from_cvu)
"""The variables the engine copies from CVU's Dataset, in the engine's order."""

TABLE_COLUMNS: tuple[str, ...] = (
    Vars.phi_gain, Vars.c_lambda, Vars.u0, Vars.mv, Vars.cvu, Vars.cvu_own, Vars.cvu_order,
    Vars.cvu_safety_value, Vars.q, Vars.value_vs_stop, Vars.overrun, Vars.feasible,
    Vars.chosen, Vars.excluded_reason)
"""The compact decision table's columns, in order (:func:`belief.decision.engine.
decision_table`: the campaign log and each campaign step's CSV); a family stands for its
members present."""

COORDS: Mapping[str, str] = {
    "candidate": "the candidate id m (the dimension of every variable)",
    "role": "m's role (adaptation, diagnosis, model_update)",
    "lens": "m's lens (model, data, representation, optimization)",
    "method": "m's method label",
}
"""The coordinates, all over ``candidate``."""


def per_resource(family: str, resource: str) -> str:
    """A family's member for one resource: ``per_resource(Vars.cost, "real_h")`` is
    ``cost_real_h``."""
    if RESOURCE not in family:
        raise ValueError(f"{family!r} is not a per-resource family")
    return family.replace(RESOURCE, resource)


def members(decision: xr.Dataset, family: str) -> list[str]:
    """The variables of ``decision`` that belong to ``family`` (``overrun_{resource}``: every
    ``overrun_<r>``), in the Dataset's order."""
    prefix, _, suffix = family.partition(RESOURCE)
    return [str(v) for v in decision.data_vars
            if str(v).startswith(prefix) and str(v).endswith(suffix)
            and len(str(v)) > len(prefix) + len(suffix)]


def member_resources(decision: xr.Dataset, family: str) -> list[str]:
    """The resources of ``family``'s members in ``decision`` (:func:`members`):
    ``["real_h", "compute"]`` for ``overrun_real_h``, ``overrun_compute``."""
    prefix, _, suffix = family.partition(RESOURCE)
    return [m[len(prefix):len(m) - len(suffix)] for m in members(decision, family)]


def table_columns(decision: xr.Dataset) -> list[str]:
    """:data:`TABLE_COLUMNS` that ``decision`` holds, each family expanded to its members."""
    out: list[str] = []
    for name in TABLE_COLUMNS:
        out += members(decision, name) if RESOURCE in name else (
            [name] if name in decision else [])
    return out


def _declared(name: str, decls: Iterable[Variable | Attribute], resources: list[str]
              ) -> Variable | Attribute | None:
    for d in decls:
        if d.name == name or (d.family and any(per_resource(d.name, r) == name
                                               for r in resources)):
            return d
    return None


def _members(d: Variable | Attribute, resources: list[str]) -> list[str]:
    return [per_resource(d.name, r) for r in resources] if d.family else [d.name]


def _kind_ok(value: object, dtype: str) -> bool:
    import numpy as np

    kind = np.asarray(value).dtype.kind
    if kind == "O" and dtype == "str":
        return all(isinstance(v, str) for v in np.asarray(value).ravel())
    return kind in _KINDS[dtype]


def schema_problems(decision: xr.Dataset, resources: list[str], *, set_by: Iterable[str] = (),
                    dtypes: bool = True) -> list[str]:
    """What in ``decision`` departs from the schema, one line each (empty: it conforms).

    A variable or attribute that is not declared; a declared one that is missing when it is
    always present (attributes: only those set by one of ``set_by``, besides ``decide``);
    a variable not over the declared dims; with ``dtypes`` a value of another type.
    """
    setters = {"decide", *set_by}
    out: list[str] = []
    for name in decision.data_vars:
        d = _declared(str(name), VARIABLES, resources)
        if d is None:
            out.append(f"variable {name!r} is not declared")
            continue
        if decision[name].dims != d.dims:
            out.append(f"variable {name!r} is over {decision[name].dims}, declared {d.dims}")
        elif dtypes and not _kind_ok(decision[name].values, d.dtype):
            out.append(f"variable {name!r} has dtype {decision[name].dtype}, declared "
                       f"{d.dtype}")
    for name, value in decision.attrs.items():
        a = _declared(str(name), ATTRIBUTES, resources)
        if a is None:
            out.append(f"attribute {name!r} is not declared")
        elif dtypes and not _kind_ok(value, a.dtype) and not (
                a.dtype == "int" and type(value).__name__ in ("bool", "bool_")):
            out.append(f"attribute {name!r} is {type(value).__name__}, declared {a.dtype}")
    for v in VARIABLES:
        if not v.optional:
            out += [f"variable {n!r} is missing" for n in _members(v, resources)
                    if n not in decision.data_vars]
    for a in ATTRIBUTES:
        if not a.optional and setters & {s.strip() for s in a.set_by.split(",")}:
            out += [f"attribute {n!r} is missing" for n in _members(a, resources)
                    if n not in decision.attrs]
    out += [f"coordinate {c!r} is missing" for c in COORDS if c not in decision.coords]
    return out


def check_decision(decision: xr.Dataset, resources: list[str], *,
                   set_by: Iterable[str] = (), dtypes: bool = True) -> xr.Dataset:
    """``decision`` unchanged when it conforms to the schema (:func:`schema_problems`), else a
    ``ValueError`` listing every departure (a defect of the code that built it, not of the
    user's input)."""
    problems = schema_problems(decision, resources, set_by=set_by, dtypes=dtypes)
    if problems:
        raise ValueError("the decision departs from belief.decision.schema: "
                         + "; ".join(problems))
    return decision


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def reference_markdown() -> str:
    """The documentation's reference page of the decision Dataset (the generated page
    ``decision.md`` of the reference section, written by ``docs/_ext/belief_docs.py``)."""
    lines = ["# The decision Dataset", "",
             "Generated from `belief.decision.schema`, the one declaration the engine checks its "
             "output against. `belief.decide(...)`, `FittedBelief.decide(...)` and `belief "
             "decide` (its `decision.nc`; `decision.csv` holds the variables, one row per "
             "candidate) return an `xarray.Dataset` over `candidate` with the variables and "
             "attributes below. A name with `{resource}` stands for one entry per resource "
             "of the candidate file (`cost_real_h`, …). Units: `J` is the evaluation metric's "
             "scale (gains, utilities, CVU and Q are differences of J; C_λ = λᵀΔC is on the "
             "same scale); a cost is in its resource's unit.", "",
             "## Coordinates", "", "| coordinate | meaning |", "|---|---|",
             *[f"| `{c}` | {_cell(m)} |" for c, m in COORDS.items()], "",
             "## Variables", "",
             f"{len(VARIABLES)} declarations, each over `candidate`, in the order of the "
             "columns of `decision.csv`. In the compact table (the terminal, the campaign "
             "log): " + ", ".join(f"`{c}`" for c in TABLE_COLUMNS) + ".", "",
             "| variable | meaning | units | type | present | label |",
             "|---|---|---|---|---|---|"]
    lines += [f"| `{v.name}` | {_cell(v.meaning)} | {_cell(v.units) or '—'} | {v.dtype} | "
              f"{_cell(v.when) or 'always'} | {_cell(LABELS.get(v.name, ''))} |"
              for v in VARIABLES]
    lines += ["", "## Attributes", "",
              f"{len(ATTRIBUTES)} declarations. `set by`: `decide` is the engine "
              "(`belief.decision.engine.decide`, every caller); `FittedBelief.decide` adds "
              "what a fitted belief knows (the notebook API and `belief decide`); `campaign` "
              "the campaign loop and replay; `save_decision` the decision file. A flag is an "
              "integer 0/1 (netCDF has no booleans).", "",
              "| attribute | meaning | units | type | present | set by |",
              "|---|---|---|---|---|---|"]
    lines += [f"| `{a.name}` | {_cell(a.meaning)} | {_cell(a.units) or '—'} | {a.dtype} | "
              f"{_cell(a.when) or 'always'} | {a.set_by} |" for a in ATTRIBUTES]
    return "\n".join(lines) + "\n"
