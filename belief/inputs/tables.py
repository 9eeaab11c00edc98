"""The evidence tables: their columns and validators, each row tagged with step, policy and
evaluation protocol.

Paired evaluations (binary)
    One row per paired evaluation of a policy-changing candidate: the control policy ``policy``
    and the policy after the intervention (``treated_policy``; when the column is absent it is
    named ``"{policy}+{candidate}"``), each evaluated under the campaign's shared evaluation
    protocol E_shared.

    ======================  ===========================================================
    column                  meaning
    ======================  ===========================================================
    step                    campaign step t (integer ≥ 0)
    candidate               candidate id (must be in the candidate file, policy-changing)
    policy                  the control policy π_t
    eval_protocol           must equal the campaign's E_shared
    control_successes       successes of π_t (integer, 0 ≤ · ≤ control_trials)
    control_trials          trials of π_t (integer ≥ 0)
    treated_successes       successes of the treated policy (0 ≤ · ≤ treated_trials)
    treated_trials          trials of the treated policy (integer ≥ 0)
    treated_policy          optional: name of the policy the intervention produced
    ======================  ===========================================================

Simulated paired evaluations (binary)
    ``sim_paired_evaluations``: the same comparison run in simulation, in the same columns as
    ``paired_evaluations`` (:data:`SIM_PAIRED_COLUMNS`) and under the same rules — the same
    shared protocol E_shared included, so that the sim gain and the real gain are gains of one
    task.  Optional: :class:`~belief.inputs.evidence.Evidence`'s ``sim_paired``, an evidence
    folder's ``sim_paired_evaluations.csv`` (or ``.parquet``); read by
    :mod:`models.sim_proxy`, which learns how the sim gains predict the real ones.

Rows are refused with :class:`~belief.errors.InputError` naming the table, the row and the rule;
nothing is kept from a refused table.

One run, one row
    In ``paired_evaluations``, ``sim_paired_evaluations``, ``safety_events``,
    ``policy_evaluations``, ``gain_estimates``, ``deployment_safety`` and
    ``transfer_evaluations`` two rows equal in every column the models read are refused as one
    run recorded twice (summing them would count it twice: 2/70 unsafe would become 4/140).  An
    optional ``run_id`` column tells runs with equal values apart; a run id may appear on one
    row only.  (Sensitivity sweeps replicate design points by design, so equal sensitivity runs
    are kept.)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from belief.errors import InputError
from belief.inputs.candidates import Candidate, CandidateSet
from belief.inputs.columns import (
    at_most,
    base_columns,
    check_columns,
    check_counts,
    checked_frame,
    empty_frame,
    float_column,
    integer_column,
    interface_columns,
    present,
    refuse_duplicates,
    string_column,
)
from belief.inputs.lineage import policy_tree

__all__ = ["COUNT_COLUMNS", "DEPLOYMENT_COLUMNS", "DIRECTION_ESTIMATE_COLUMNS",
           "GAIN_ESTIMATE_COLUMNS", "MODEL_UPDATE_COLUMNS", "OMITTED_WHEN_EMPTY",
           "PAIRED_COLUMNS", "POLICY_EVAL_COLUMNS", "SAFETY_COLUMNS", "SENSITIVITY_COLUMNS",
           "SENS_FAMILIES", "SIM_PAIRED_COLUMNS", "TABLES", "TRANSFER_COLUMNS",
           "TRANSFER_FAMILIES", "XI_PREFIX",
           "empty_deployment", "empty_direction_estimates", "empty_gain_estimates",
           "empty_model_updates", "empty_paired",
           "empty_policy_evals", "empty_safety", "empty_sensitivity", "empty_sim_paired",
           "empty_transfer",
           "family_of", "outcome_family", "validate_deployment",
           "validate_direction_estimates", "validate_gain_estimates",
           "validate_model_updates", "validate_paired", "validate_policy_evals",
           "validate_safety", "validate_sensitivity", "validate_sim_paired",
           "validate_transfer", "xi_directions"]


PAIRED_COLUMNS = ("step", "candidate", "policy", "eval_protocol", "control_successes",
                  "control_trials", "treated_successes", "treated_trials")


SIM_PAIRED_COLUMNS = PAIRED_COLUMNS
"""Columns of ``sim_paired_evaluations``: those of ``paired_evaluations``."""


SAFETY_COLUMNS = ("step", "candidate", "executions", "unsafe")


POLICY_EVAL_COLUMNS = ("step", "policy", "eval_protocol", "successes", "trials")


DEPLOYMENT_COLUMNS = ("step", "policy", "trials", "unsafe")


GAIN_ESTIMATE_COLUMNS = ("step", "candidate", "policy", "eval_protocol", "estimate", "se")


MODEL_UPDATE_COLUMNS = ("step", "candidate")


DIRECTION_ESTIMATE_COLUMNS = ("step", "candidate", "direction", "estimate", "se")


COUNT_COLUMNS = ("control_successes", "control_trials", "treated_successes", "treated_trials")


def _known_candidates(out: pd.DataFrame, candidates: CandidateSet, table: str,
                      allowed: Callable[[Candidate], bool], why: Callable[[Candidate], str]
                      ) -> None:
    """Every row's ``candidate`` is in the set and passes ``allowed`` (else ``why(c)``)."""
    known = set(candidates.ids)
    for i, cid in enumerate(out["candidate"]):
        if cid not in known:
            raise InputError(table, f"unknown candidate {cid!r}; known: {candidates.ids}", row=i)
        if not allowed(candidates[cid]):
            raise InputError(table, why(candidates[cid]), row=i)


def _shared_protocol(out: pd.DataFrame, candidates: CandidateSet, table: str,
                     note: str = "") -> None:
    """Every row's ``eval_protocol`` is the campaign's shared protocol."""
    for i, proto in enumerate(out["eval_protocol"]):
        if proto != candidates.eval_protocol:
            raise InputError(table, f"eval_protocol {proto!r} differs from the campaign's shared "
                                    f"protocol {candidates.eval_protocol!r}{note}", row=i)


def validate_paired(df: pd.DataFrame, candidates: CandidateSet,
                    table: str = "paired_evaluations") -> pd.DataFrame:
    """Validate a paired binary evaluation table and return a clean copy.

    Rules: every column of :data:`PAIRED_COLUMNS` present; counts are non-negative integers with
    successes ≤ trials in each arm; ``step`` a non-negative integer; ``candidate`` known and
    policy-changing; ``eval_protocol`` equal to the campaign's E_shared; a ``treated_policy``
    produced by exactly one (policy, candidate) and never its own control.
    """
    df = checked_frame(df, PAIRED_COLUMNS, table)
    out = pd.DataFrame({"step": integer_column(df, "step", table)})
    for col in ("candidate", "policy", "eval_protocol"):
        out[col] = string_column(df, col, table)
    for col in COUNT_COLUMNS:
        out[col] = integer_column(df, col, table)
    for arm in ("control", "treated"):
        at_most(out, f"{arm}_successes", f"{arm}_trials", table)
    _known_candidates(out, candidates, table, lambda c: c.changes_policy,
                      lambda c: f"candidate {c.id!r} has role {c.role!r}: paired evaluations "
                                "are for policy-changing candidates")
    _shared_protocol(out, candidates, table, " (it would mix task-specification mismatch into "
                                             "the evidence)")
    if "treated_policy" in df.columns:
        out["treated_policy"] = string_column(df, "treated_policy", table)
    else:
        out["treated_policy"] = [f"{p}+{c}" for p, c in zip(out["policy"], out["candidate"],
                                                             strict=True)]
    policy_tree(out, table=table)  # lineage rules
    return refuse_duplicates(df, out, table)


def validate_sim_paired(df: pd.DataFrame, candidates: CandidateSet,
                        table: str = "sim_paired_evaluations") -> pd.DataFrame:
    """Validate simulated paired evaluations: the rules of :func:`validate_paired`.

    Optional table: the paired comparison of a candidate (control policy against the policy
    after the intervention) run in simulation, at compute cost, in the columns of
    ``paired_evaluations``.  The sim-proxy model (``models.sim_proxy``) learns, per lens, how
    the sim gains predict the real ones from the candidates evaluated in both, so these rows
    narrow a candidate's real gain only as much as the simulator has been seen to predict
    reality.

    Columns :data:`SIM_PAIRED_COLUMNS` (optional ``treated_policy``, ``run_id``, ``note``);
    counts non-negative integers with successes ≤ trials per arm, candidate known and
    policy-changing, ``eval_protocol`` equal to the campaign's E_shared (a sim gain under
    another protocol is not a proxy of the real gain under E_shared), the treated-policy lineage
    rules and one run per row.  Refusals name this table.
    """
    return validate_paired(df, candidates, table)


def validate_safety(df: pd.DataFrame, candidates: CandidateSet,
                    table: str = "safety_events") -> pd.DataFrame:
    """Validate an execution-safety table: executions of hardware candidates and unsafe outcomes.

    Columns :data:`SAFETY_COLUMNS` (``policy`` optional). Rules: non-negative integer counts,
    ``unsafe`` ≤ ``executions``, candidate known and driving hardware.
    """
    df = checked_frame(df, SAFETY_COLUMNS, table)
    out = pd.DataFrame({"step": integer_column(df, "step", table),
                        "candidate": string_column(df, "candidate", table),
                        "executions": integer_column(df, "executions", table),
                        "unsafe": integer_column(df, "unsafe", table)})
    if "policy" in df.columns:  # optional: the policy running when the events happened
        out["policy"] = df["policy"].fillna("").astype(str).to_numpy()
    at_most(out, "unsafe", "executions", table, verb="exceeds")
    _known_candidates(out, candidates, table, lambda c: c.drives_hardware,
                      lambda c: f"candidate {c.id!r} does not drive hardware: execution-safety "
                                "events are for hardware candidates only")
    return refuse_duplicates(df, out, table)


def validate_policy_evals(df: pd.DataFrame, candidates: CandidateSet,
                          table: str = "policy_evaluations") -> pd.DataFrame:
    """Validate stand-alone evaluations of a policy (no intervention) under E_shared.

    Columns :data:`POLICY_EVAL_COLUMNS`. Rules: non-negative integer counts, successes ≤
    trials, ``eval_protocol`` equal to the campaign's E_shared.
    """
    df = checked_frame(df, POLICY_EVAL_COLUMNS, table)
    out = pd.DataFrame({"step": integer_column(df, "step", table),
                        "policy": string_column(df, "policy", table),
                        "eval_protocol": string_column(df, "eval_protocol", table),
                        "successes": integer_column(df, "successes", table),
                        "trials": integer_column(df, "trials", table)})
    at_most(out, "successes", "trials", table)
    _shared_protocol(out, candidates, table)
    return refuse_duplicates(df, out, table)


def validate_deployment(df: pd.DataFrame, candidates: CandidateSet,
                        table: str = "deployment_safety") -> pd.DataFrame:
    """Validate deployment-safety trials of a (final) policy: P_deploy(unsafe | π).

    Deployment events are kept apart from execution-safety events (``safety_events``): they
    are outcomes of *running the policy* in deployment, not of executing an intervention.
    Columns :data:`DEPLOYMENT_COLUMNS`. Rules: ``step`` a non-negative integer, ``policy`` a
    non-empty name, ``trials`` and ``unsafe`` non-negative integer counts with
    ``unsafe`` ≤ ``trials``.
    """
    df = checked_frame(df, DEPLOYMENT_COLUMNS, table)
    out = pd.DataFrame({"step": integer_column(df, "step", table),
                        "policy": string_column(df, "policy", table),
                        "trials": integer_column(df, "trials", table),
                        "unsafe": integer_column(df, "unsafe", table)})
    at_most(out, "unsafe", "trials", table, verb="exceeds")
    return refuse_duplicates(df, out, table)


def validate_gain_estimates(df: pd.DataFrame, candidates: CandidateSet,
                            table: str = "gain_estimates") -> pd.DataFrame:
    """Validate summary-level gain measurements (estimate, se) of adaptations.

    Each row is a measurement, on the logit scale, of the gain of the next execution of
    ``candidate`` from ``policy`` (e.g. a diagnosis pilot), with standard error ``se``; the
    policy does not change.  Columns :data:`GAIN_ESTIMATE_COLUMNS` (``source``, the diagnosis
    that produced it, optional).  Rules: candidate known and policy-changing, finite estimate,
    se > 0, ``eval_protocol`` equal to E_shared.
    """
    df = checked_frame(df, GAIN_ESTIMATE_COLUMNS, table)
    out = pd.DataFrame({"step": integer_column(df, "step", table),
                        "candidate": string_column(df, "candidate", table),
                        "policy": string_column(df, "policy", table),
                        "eval_protocol": string_column(df, "eval_protocol", table),
                        "estimate": float_column(df, "estimate", table),
                        "se": float_column(df, "se", table, positive=True)})
    out["source"] = (df["source"].fillna("").astype(str).to_numpy() if "source" in df.columns
                     else "")
    _known_candidates(out, candidates, table, lambda c: c.changes_policy,
                      lambda c: f"candidate {c.id!r} has role {c.role!r}: gain estimates are "
                                "for policy-changing candidates")
    _shared_protocol(out, candidates, table)
    return refuse_duplicates(df, out, table)


def validate_model_updates(df: pd.DataFrame, candidates: CandidateSet,
                           table: str = "model_updates") -> pd.DataFrame:
    """Validate the record of executed model updates (the sources of order effects).

    Each row says that model-update candidate ``candidate`` ran at ``step`` (``policy``, the
    policy running then, optional): every adaptation evaluated at a later step has it in its
    history (:mod:`models.gains`, "Order effects").  Columns :data:`MODEL_UPDATE_COLUMNS`.
    Rules: ``step`` a non-negative integer, candidate known and of role ``model_update``.
    """
    df = checked_frame(df, MODEL_UPDATE_COLUMNS, table)
    out = pd.DataFrame({"step": integer_column(df, "step", table),
                        "candidate": string_column(df, "candidate", table)})
    if "policy" in df.columns:
        out["policy"] = df["policy"].fillna("").astype(str).to_numpy()
    _known_candidates(out, candidates, table, lambda c: c.role == "model_update",
                      lambda c: f"candidate {c.id!r} has role {c.role!r}: this table records "
                                "model updates only (adaptations are on the policy lineage)")
    return refuse_duplicates(df, out, table)


def validate_direction_estimates(df: pd.DataFrame, candidates: CandidateSet,
                                 table: str = "direction_estimates") -> pd.DataFrame:
    """Validate the measurements of mismatch directions by diagnoses (``targets``).

    Each row is diagnosis ``candidate``'s measurement at ``step``, on the logit-gain scale,
    of the direction effect ξ_k of ``direction`` k — the logit gain shared by the adaptations
    that target k (:mod:`models.gains`, "Direction effects") — with standard error ``se``
    (``policy``, the policy running then, optional).  Columns
    :data:`DIRECTION_ESTIMATE_COLUMNS`.  Rules: candidate known and a diagnosis that measures
    ``direction`` (``targets`` with ``measurement_se``), finite estimate, se > 0.
    """
    df = checked_frame(df, DIRECTION_ESTIMATE_COLUMNS, table)
    out = pd.DataFrame({"step": integer_column(df, "step", table),
                        "candidate": string_column(df, "candidate", table),
                        "direction": string_column(df, "direction", table),
                        "estimate": float_column(df, "estimate", table),
                        "se": float_column(df, "se", table, positive=True)})
    if "policy" in df.columns:
        out["policy"] = df["policy"].fillna("").astype(str).to_numpy()
    _known_candidates(out, candidates, table, lambda c: bool(c.measures),
                      lambda c: f"candidate {c.id!r} measures no direction (a diagnosis with "
                                "targets and measurement_se does)")
    for i, (c, k) in enumerate(zip(out["candidate"], out["direction"], strict=True)):
        if k not in candidates[c].measures:
            raise InputError(table, f"{c!r} does not measure direction {k!r} (it measures "
                                    f"{list(candidates[c].measures)})", row=i)
    return refuse_duplicates(df, out, table)


def empty_direction_estimates() -> pd.DataFrame:
    return empty_frame(DIRECTION_ESTIMATE_COLUMNS, floats=("estimate", "se"))


def empty_model_updates() -> pd.DataFrame:
    return empty_frame(MODEL_UPDATE_COLUMNS)


def empty_gain_estimates() -> pd.DataFrame:
    return empty_frame((*GAIN_ESTIMATE_COLUMNS, "source"), floats=("estimate", "se"))


def empty_paired() -> pd.DataFrame:
    return empty_frame((*PAIRED_COLUMNS, "treated_policy"))


def empty_sim_paired() -> pd.DataFrame:
    return empty_paired()


def empty_safety() -> pd.DataFrame:
    return empty_frame(SAFETY_COLUMNS)


def empty_policy_evals() -> pd.DataFrame:
    return empty_frame(POLICY_EVAL_COLUMNS)


def empty_deployment() -> pd.DataFrame:
    return empty_frame(DEPLOYMENT_COLUMNS)


SENSITIVITY_COLUMNS = ("step", "policy", "eval_protocol")


TRANSFER_COLUMNS = ("step", "policy", "eval_protocol")


XI_PREFIX = "xi_"


SENS_FAMILIES = {"binomial": ("successes", "trials"), "normal": ("mean", "se")}


TRANSFER_FAMILIES = {"binomial": ("sim_successes", "sim_trials", "real_successes",
                                   "real_trials"),
                      "normal": ("sim_mean", "sim_se", "real_mean", "real_se")}


def xi_directions(df: pd.DataFrame) -> list[str]:
    """Mismatch directions of a sensitivity table: the ``<direction>`` of every ``xi_<direction>``
    column, in column order (these are the names candidates' ``targets`` refer to)."""
    return [c[len(XI_PREFIX):] for c in df.columns
            if isinstance(c, str) and c.startswith(XI_PREFIX)]


def family_of(df: pd.DataFrame, families: dict[str, tuple[str, ...]],
                    table: str) -> str | None:
    """The single outcome family of a table (None when it has no rows).

    A row belongs to a family when any of the family's columns holds a value; a row with values
    of two families, a row with none, and a table mixing families are refused.
    """
    flags = {name: np.column_stack([present(df, c) for c in cols]).any(axis=1)
             for name, cols in families.items()}
    first: tuple[str, int] | None = None
    for i in range(len(df)):
        here = [name for name in families if flags[name][i]]
        if len(here) > 1:
            raise InputError(table, "row has values for both outcome families (" + " and ".join(
                f"{name}: {', '.join(families[name])}" for name in here) + "); give one", row=i)
        if not here:
            raise InputError(table, "outcome missing: give " + " or ".join(
                f"{', '.join(cols)} ({name})" for name, cols in families.items()), row=i)
        if first is None:
            first = (here[0], i)
        elif here[0] != first[0]:
            raise InputError(table, f"mixed outcome families in one table: row {first[1]} is "
                                    f"{first[0]}, this row is {here[0]} (one family per table; "
                                    "fit them as separate tables)", row=i)
    return None if first is None else first[0]


def validate_sensitivity(df: pd.DataFrame, candidates: CandidateSet,
                         table: str = "sensitivity_runs") -> pd.DataFrame:
    """Validate sensitivity runs: perturbation settings ξ_k and the outcome J under one policy.

    Columns: :data:`SENSITIVITY_COLUMNS`; one ``xi_<direction>`` column per perturbed mismatch
    direction (numbers in the direction's own units; ``<direction>`` is the name candidates'
    ``targets`` use); an outcome of *one* family for the whole table — binomial ``successes``,
    ``trials`` (J = success probability) or normal ``mean`` with optional ``se`` (measurement
    standard error, default 0); optional ``policy_interface``.

    Rules: at least one ξ column; every ξ finite; every ξ column varies within the runs of each
    policy (a constant column carries no information about S_k(π)); binomial counts are integers
    with 1 ≤ trials and 0 ≤ successes ≤ trials; a normal mean is finite and se ≥ 0; no mixing
    of families; ``eval_protocol`` equal to E_shared; ``policy_interface`` (when given) equal to
    the campaign's.
    """
    if not isinstance(df, pd.DataFrame):
        raise InputError(table, f"expected a pandas DataFrame, got {type(df).__name__}")
    check_columns(df, SENSITIVITY_COLUMNS, table)
    df = df.reset_index(drop=True)
    if not len(df):
        return df.copy()
    directions = xi_directions(df)
    if not directions:
        raise InputError(table, "missing ξ columns: no column named xi_<direction> (e.g. "
                                "xi_friction, xi_latency); a sensitivity run must state its "
                                "perturbation settings")
    if "" in directions:
        raise InputError(table, f"ξ column {XI_PREFIX!r} has no direction name after the prefix")
    out = base_columns(df, candidates, table)
    family = family_of(df, SENS_FAMILIES, table)
    if family == "binomial":
        check_columns(df, (*SENSITIVITY_COLUMNS, "successes", "trials"), table)
        out["successes"] = integer_column(df, "successes", table)
        out["trials"] = integer_column(df, "trials", table)
        check_counts(out, "successes", "trials", table)
    else:
        check_columns(df, (*SENSITIVITY_COLUMNS, "mean"), table)
        out["mean"] = float_column(df, "mean", table)
        if "se" in df.columns:
            out["se"] = float_column(df, "se", table)
            bad = np.flatnonzero(out["se"] < 0)
            if bad.size:
                raise InputError(table, f"outcome out of range: se must be >= 0, got "
                                        f"{out['se'][int(bad[0])]}", row=int(bad[0]))
        else:
            out["se"] = 0.0
    for k in directions:
        col = f"{XI_PREFIX}{k}"
        out[col] = float_column(df, col, table)
        if out[col].nunique() < 2:
            raise InputError(table, f"{col} is constant ({out[col][0]:g}) in every row: a "
                                    f"constant ξ column carries no information about S_{k}; vary "
                                    "it or drop the column", row=0)
        for policy, idx in out.groupby("policy", sort=False).groups.items():
            if out[col][idx].nunique() < 2:
                raise InputError(table, f"{col} is constant ({out[col][idx[0]]:g}) over the runs "
                                        f"of policy {policy!r}: no information about "
                                        f"S_{k}({policy}); sweep it under every policy",
                                 row=int(idx[0]))
    return out


def validate_transfer(df: pd.DataFrame, candidates: CandidateSet,
                      table: str = "transfer_evaluations") -> pd.DataFrame:
    """Validate transfer evaluations: the same policy scored in sim and in real under E_shared.

    Each row gives J_sim(π) and J_real(π) of ``policy``, so δ_J(π) = J_real − J_sim (positive
    when real is better).  Columns: :data:`TRANSFER_COLUMNS` and one outcome family for the
    whole table — binomial ``sim_successes, sim_trials, real_successes, real_trials`` or normal
    ``sim_mean, sim_se, real_mean, real_se``; optional ``policy_interface`` and
    ``sim_interface`` / ``real_interface``.

    Rules: binomial counts integers with 1 ≤ trials and 0 ≤ successes ≤ trials in each domain;
    normal means finite and se > 0; no mixing of families; ``eval_protocol`` equal to E_shared;
    interfaces (when given) equal to the campaign's, and ``sim_interface`` equal to
    ``real_interface`` (otherwise π is not the same function in sim and real and δ_J has no
    definition).
    """
    if not isinstance(df, pd.DataFrame):
        raise InputError(table, f"expected a pandas DataFrame, got {type(df).__name__}")
    check_columns(df, TRANSFER_COLUMNS, table)
    df = df.reset_index(drop=True)
    if not len(df):
        return df.copy()
    out = base_columns(df, candidates, table)
    interface_columns(df, out, candidates, table, ("sim_interface", "real_interface"))
    if "sim_interface" in out and "real_interface" in out:
        for i, (s, r) in enumerate(zip(out["sim_interface"], out["real_interface"],
                                       strict=True)):
            if s and r and s != r:
                raise InputError(table, f"sim_interface {s!r} differs from real_interface {r!r}:"
                                        " the policy is not the same function in sim and real, "
                                        "so δ_J = J_real − J_sim loses its definition", row=i)
    family = family_of(df, TRANSFER_FAMILIES, table)
    cols = TRANSFER_FAMILIES[family]
    check_columns(df, (*TRANSFER_COLUMNS, *cols), table)
    if family == "binomial":
        for col in cols:
            out[col] = integer_column(df, col, table)
        for domain in ("sim", "real"):
            check_counts(out, f"{domain}_successes", f"{domain}_trials", table)
    else:
        for domain in ("sim", "real"):
            out[f"{domain}_mean"] = float_column(df, f"{domain}_mean", table)
            se = f"{domain}_se"
            out[se] = float_column(df, se, table)
            bad = np.flatnonzero(out[se] <= 0)
            if bad.size:
                raise InputError(table, f"outcome out of range: {se} must be > 0, got "
                                        f"{out[se][int(bad[0])]}", row=int(bad[0]))
    return refuse_duplicates(df, out, table)


def outcome_family(df: pd.DataFrame) -> str | None:
    """``"binomial"`` or ``"normal"`` for a validated sensitivity or transfer table (None if
    empty)."""
    if not len(df):
        return None
    return "binomial" if ("successes" in df.columns or "sim_successes" in df.columns) \
        else "normal"


def empty_sensitivity() -> pd.DataFrame:
    return empty_frame(POLICY_EVAL_COLUMNS)


def empty_transfer() -> pd.DataFrame:
    return empty_frame(("step", "policy", "eval_protocol", *TRANSFER_FAMILIES["binomial"]))


TABLES = {"paired_evaluations": ("paired", validate_paired),
           "gain_estimates": ("gain_estimates", validate_gain_estimates),
           "policy_evaluations": ("policy_evals", validate_policy_evals),
           "safety_events": ("safety", validate_safety),
           "deployment_safety": ("deployment", validate_deployment),
           "sensitivity_runs": ("sensitivity", validate_sensitivity),
           "transfer_evaluations": ("transfer", validate_transfer),
           "model_updates": ("model_updates", validate_model_updates),
           "direction_estimates": ("direction_estimates", validate_direction_estimates),
           "sim_paired_evaluations": ("sim_paired", validate_sim_paired)}


OMITTED_WHEN_EMPTY = ("sim_paired_evaluations",)
"""Tables :meth:`belief.inputs.evidence.Evidence.tables` lists only when they have rows: a
belief file or a campaign's evidence folder without simulated evaluations is written as it
was before the table existed."""
