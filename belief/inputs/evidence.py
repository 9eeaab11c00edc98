"""Evidence D_t: validated long tables, each row tagged with step, policy and eval protocol.

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

Rows are refused with :class:`~belief.errors.InputError` naming the table, the row and the rule;
nothing is kept from a refused table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from belief.errors import InputError
from belief.inputs.candidates import CandidateSet

__all__ = [
    "DEPLOYMENT_COLUMNS",
    "GAIN_ESTIMATE_COLUMNS",
    "PAIRED_COLUMNS",
    "POLICY_EVAL_COLUMNS",
    "SAFETY_COLUMNS",
    "SENSITIVITY_COLUMNS",
    "TRANSFER_COLUMNS",
    "Evidence",
    "PolicyTree",
    "outcome_family",
    "policy_tree",
    "read_table",
    "validate_deployment",
    "validate_gain_estimates",
    "validate_paired",
    "validate_policy_evals",
    "validate_safety",
    "validate_sensitivity",
    "validate_transfer",
    "xi_directions",
]

PAIRED_COLUMNS = ("step", "candidate", "policy", "eval_protocol", "control_successes",
                  "control_trials", "treated_successes", "treated_trials")
SAFETY_COLUMNS = ("step", "candidate", "executions", "unsafe")
POLICY_EVAL_COLUMNS = ("step", "policy", "eval_protocol", "successes", "trials")
DEPLOYMENT_COLUMNS = ("step", "policy", "trials", "unsafe")
GAIN_ESTIMATE_COLUMNS = ("step", "candidate", "policy", "eval_protocol", "estimate", "se")
_COUNT_COLUMNS = ("control_successes", "control_trials", "treated_successes", "treated_trials")


def read_table(path: str | Path, table: str | None = None) -> pd.DataFrame:
    """Read a CSV or Parquet file into a DataFrame, refusing anything else."""
    path = Path(path)
    table = table or path.name
    if not path.exists():
        raise InputError(table, f"file not found: {path}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            return pd.read_csv(path)
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as err:
        raise InputError(table, f"cannot read {path.name} as {suffix[1:]}: {err}") from None
    except ImportError as err:
        raise InputError(table, f"reading {suffix} needs an optional dependency: {err}") from None
    raise InputError(table, f"{path.name} is neither CSV (.csv) nor Parquet (.parquet)")


def _show(v: object) -> str:
    """A value as a user wrote it (numpy scalars unwrapped)."""
    return repr(v.item() if isinstance(v, np.generic) else v)


def _integer_column(df: pd.DataFrame, col: str, table: str) -> np.ndarray:
    values = df[col].to_numpy()
    for i, v in enumerate(values):
        if isinstance(v, bool | np.bool_):
            raise InputError(table, f"{col} must be an integer count, got {_show(v)}", row=i)
        try:
            fv = float(v)
        except (TypeError, ValueError):
            raise InputError(table, f"{col} must be an integer count, got {_show(v)}",
                             row=i) from None
        if not np.isfinite(fv):
            raise InputError(table, f"{col} is missing or not finite", row=i)
        if fv != np.floor(fv):
            raise InputError(table, f"{col} must be an integer count, got {_show(v)}", row=i)
        if fv < 0:
            raise InputError(table, f"{col} must be >= 0 (negative count {_show(v)})", row=i)
        if fv > 2**53:
            raise InputError(table, f"{col} is implausibly large ({_show(v)})", row=i)
    return values.astype(float).astype(np.int64)


def _string_column(df: pd.DataFrame, col: str, table: str) -> np.ndarray:
    values = df[col].to_numpy(dtype=object)
    for i, v in enumerate(values):
        if v is None or (isinstance(v, float) and np.isnan(v)) or str(v).strip() == "":
            raise InputError(table, f"{col} is missing", row=i)
    return np.array([str(v) for v in values], dtype=object)


def _at_most(out: pd.DataFrame, part: str, whole: str, table: str, *, verb: str = "exceed",
             prefix: str = "") -> None:
    """Refuse the first row whose count ``part`` is above its ``whole`` (successes ≤ trials)."""
    bad = np.flatnonzero(out[part] > out[whole])
    if bad.size:
        i = int(bad[0])
        raise InputError(table, f"{prefix}{part} ({out[part][i]}) {verb} {whole} "
                                f"({out[whole][i]})", row=i)


def validate_paired(df: pd.DataFrame, candidates: CandidateSet,
                    table: str = "paired_evaluations") -> pd.DataFrame:
    """Validate a paired binary evaluation table and return a clean copy.

    Rules: every column of :data:`PAIRED_COLUMNS` present; counts are non-negative integers with
    successes ≤ trials in each arm; ``step`` a non-negative integer; ``candidate`` known and
    policy-changing; ``eval_protocol`` equal to the campaign's E_shared; a ``treated_policy``
    produced by exactly one (policy, candidate) and never its own control.
    """
    df = _frame(df, PAIRED_COLUMNS, table)
    out = pd.DataFrame({"step": _integer_column(df, "step", table)})
    for col in ("candidate", "policy", "eval_protocol"):
        out[col] = _string_column(df, col, table)
    for col in _COUNT_COLUMNS:
        out[col] = _integer_column(df, col, table)
    for arm in ("control", "treated"):
        _at_most(out, f"{arm}_successes", f"{arm}_trials", table)
    known = set(candidates.ids)
    for i, cid in enumerate(out["candidate"]):
        if cid not in known:
            raise InputError(table, f"unknown candidate {cid!r}; known: {candidates.ids}", row=i)
        if not candidates[cid].changes_policy:
            raise InputError(table, f"candidate {cid!r} has role {candidates[cid].role!r}: "
                                    "paired evaluations are for policy-changing candidates", row=i)
    for i, proto in enumerate(out["eval_protocol"]):
        if proto != candidates.eval_protocol:
            raise InputError(table, f"eval_protocol {proto!r} differs from the campaign's shared "
                                    f"protocol {candidates.eval_protocol!r} (it would mix "
                                    "task-specification mismatch into the evidence)", row=i)
    if "treated_policy" in df.columns:
        out["treated_policy"] = _string_column(df, "treated_policy", table)
    else:
        out["treated_policy"] = [f"{p}+{c}" for p, c in zip(out["policy"], out["candidate"],
                                                             strict=True)]
    policy_tree(out, table=table)  # lineage rules
    return out


def validate_safety(df: pd.DataFrame, candidates: CandidateSet,
                    table: str = "safety_events") -> pd.DataFrame:
    """Validate an execution-safety table: executions of hardware candidates and unsafe outcomes.

    Columns :data:`SAFETY_COLUMNS` (``policy`` optional). Rules: non-negative integer counts,
    ``unsafe`` ≤ ``executions``, candidate known and driving hardware.
    """
    df = _frame(df, SAFETY_COLUMNS, table)
    out = pd.DataFrame({"step": _integer_column(df, "step", table),
                        "candidate": _string_column(df, "candidate", table),
                        "executions": _integer_column(df, "executions", table),
                        "unsafe": _integer_column(df, "unsafe", table)})
    if "policy" in df.columns:  # optional: the policy running when the events happened
        out["policy"] = df["policy"].fillna("").astype(str).to_numpy()
    _at_most(out, "unsafe", "executions", table, verb="exceeds")
    known = set(candidates.ids)
    for i, cid in enumerate(out["candidate"]):
        if cid not in known:
            raise InputError(table, f"unknown candidate {cid!r}; known: {candidates.ids}", row=i)
        if not candidates[cid].drives_hardware:
            raise InputError(table, f"candidate {cid!r} does not drive hardware: execution-safety "
                                    "events are for hardware candidates only", row=i)
    return out


def validate_policy_evals(df: pd.DataFrame, candidates: CandidateSet,
                          table: str = "policy_evaluations") -> pd.DataFrame:
    """Validate stand-alone evaluations of a policy (no intervention) under E_shared.

    Columns :data:`POLICY_EVAL_COLUMNS`. Rules: non-negative integer counts, successes ≤
    trials, ``eval_protocol`` equal to the campaign's E_shared.
    """
    df = _frame(df, POLICY_EVAL_COLUMNS, table)
    out = pd.DataFrame({"step": _integer_column(df, "step", table),
                        "policy": _string_column(df, "policy", table),
                        "eval_protocol": _string_column(df, "eval_protocol", table),
                        "successes": _integer_column(df, "successes", table),
                        "trials": _integer_column(df, "trials", table)})
    _at_most(out, "successes", "trials", table)
    for i, proto in enumerate(out["eval_protocol"]):
        if proto != candidates.eval_protocol:
            raise InputError(table, f"eval_protocol {proto!r} differs from the campaign's shared "
                                    f"protocol {candidates.eval_protocol!r}", row=i)
    return out


def validate_deployment(df: pd.DataFrame, candidates: CandidateSet,
                        table: str = "deployment_safety") -> pd.DataFrame:
    """Validate deployment-safety trials of a (final) policy: P_deploy(unsafe | π).

    Deployment events are kept apart from execution-safety events (``safety_events``): they
    are outcomes of *running the policy* in deployment, not of executing an intervention.
    Columns :data:`DEPLOYMENT_COLUMNS`. Rules: ``step`` a non-negative integer, ``policy`` a
    non-empty name, ``trials`` and ``unsafe`` non-negative integer counts with
    ``unsafe`` ≤ ``trials``.
    """
    df = _frame(df, DEPLOYMENT_COLUMNS, table)
    out = pd.DataFrame({"step": _integer_column(df, "step", table),
                        "policy": _string_column(df, "policy", table),
                        "trials": _integer_column(df, "trials", table),
                        "unsafe": _integer_column(df, "unsafe", table)})
    _at_most(out, "unsafe", "trials", table, verb="exceeds")
    return out


@dataclass(frozen=True)
class PolicyTree:
    """Lineage of policies: each non-root policy was produced from ``parent`` by ``via``.

    Attributes
    ----------
    policies : list of str
        Roots first, then every child after its parent (topological order).
    parent : dict of str to str
    via : dict of str to str
        The candidate whose execution produced the policy.
    """

    policies: list[str]
    parent: dict[str, str]
    via: dict[str, str]

    def ancestors(self, policy: str) -> list[str]:
        """``policy`` and its ancestors, from ``policy`` up to its root."""
        chain = [policy]
        while chain[-1] in self.parent:
            chain.append(self.parent[chain[-1]])
        return chain


def policy_tree(paired: pd.DataFrame, extra: tuple[str, ...] = (),
                table: str = "paired_evaluations") -> PolicyTree:
    """The policy lineage implied by a validated paired table (plus ``extra`` root policies).

    A ``treated_policy`` must come from one (policy, candidate) only, and no policy may be its
    own ancestor.
    """
    parent: dict[str, str] = {}
    via: dict[str, str] = {}
    for i, (p, c, t) in enumerate(zip(paired["policy"], paired["candidate"],
                                      paired["treated_policy"], strict=True)):
        if t == p:
            raise InputError(table, f"treated_policy {t!r} equals its control policy", row=i)
        if t in parent and (parent[t], via[t]) != (p, c):
            raise InputError(table, f"treated_policy {t!r} is produced by ({p!r}, {c!r}) here "
                                    f"but by ({parent[t]!r}, {via[t]!r}) earlier", row=i)
        parent[t], via[t] = p, c
    names = list(dict.fromkeys([*paired["policy"], *paired["treated_policy"], *extra]))
    order: list[str] = []
    placed: set[str] = set()

    def place(name: str, trail: tuple[str, ...]) -> None:
        if name in placed:
            return
        if name in trail:
            raise InputError(table, f"policy lineage has a cycle through {name!r}")
        if name in parent:
            place(parent[name], (*trail, name))
        placed.add(name)
        order.append(name)

    for name in names:
        place(name, ())
    return PolicyTree(order, parent, via)


def _float_column(df: pd.DataFrame, col: str, table: str, positive: bool = False) -> np.ndarray:
    values = df[col].to_numpy()
    out = np.empty(len(values))
    for i, v in enumerate(values):
        try:
            fv = float(v) if not isinstance(v, bool | np.bool_) else float("nan")
        except (TypeError, ValueError):
            fv = float("nan")
        if not np.isfinite(fv):
            raise InputError(table, f"{col} must be a finite number, got {_show(v)}", row=i)
        if positive and fv <= 0:
            raise InputError(table, f"{col} must be > 0, got {_show(v)}", row=i)
        out[i] = fv
    return out


def validate_gain_estimates(df: pd.DataFrame, candidates: CandidateSet,
                            table: str = "gain_estimates") -> pd.DataFrame:
    """Validate summary-level gain measurements (estimate, se) of adaptations.

    Each row is a measurement, on the logit scale, of the gain of the next execution of
    ``candidate`` from ``policy`` (e.g. a diagnosis pilot), with standard error ``se``; the
    policy does not change.  Columns :data:`GAIN_ESTIMATE_COLUMNS` (``source``, the diagnosis
    that produced it, optional).  Rules: candidate known and policy-changing, finite estimate,
    se > 0, ``eval_protocol`` equal to E_shared.
    """
    df = _frame(df, GAIN_ESTIMATE_COLUMNS, table)
    out = pd.DataFrame({"step": _integer_column(df, "step", table),
                        "candidate": _string_column(df, "candidate", table),
                        "policy": _string_column(df, "policy", table),
                        "eval_protocol": _string_column(df, "eval_protocol", table),
                        "estimate": _float_column(df, "estimate", table),
                        "se": _float_column(df, "se", table, positive=True)})
    out["source"] = (df["source"].fillna("").astype(str).to_numpy() if "source" in df.columns
                     else "")
    for i, cid in enumerate(out["candidate"]):
        if cid not in set(candidates.ids):
            raise InputError(table, f"unknown candidate {cid!r}; known: {candidates.ids}", row=i)
        if not candidates[cid].changes_policy:
            raise InputError(table, f"candidate {cid!r} has role {candidates[cid].role!r}: gain "
                                    "estimates are for policy-changing candidates", row=i)
    for i, proto in enumerate(out["eval_protocol"]):
        if proto != candidates.eval_protocol:
            raise InputError(table, f"eval_protocol {proto!r} differs from the campaign's shared "
                                    f"protocol {candidates.eval_protocol!r}", row=i)
    return out


_TEXT_COLUMNS = frozenset({"candidate", "policy", "eval_protocol", "source", "treated_policy"})


def _empty(columns: tuple[str, ...], floats: tuple[str, ...] = ()) -> pd.DataFrame:
    """A table without rows: text columns ``object``, ``floats`` float, the rest int64."""
    return pd.DataFrame({c: pd.Series(dtype=object if c in _TEXT_COLUMNS
                                      else float if c in floats else np.int64)
                         for c in columns})


def empty_gain_estimates() -> pd.DataFrame:
    return _empty((*GAIN_ESTIMATE_COLUMNS, "source"), floats=("estimate", "se"))


def empty_paired() -> pd.DataFrame:
    return _empty((*PAIRED_COLUMNS, "treated_policy"))


def empty_safety() -> pd.DataFrame:
    return _empty(SAFETY_COLUMNS)


def empty_policy_evals() -> pd.DataFrame:
    return _empty(POLICY_EVAL_COLUMNS)


def empty_deployment() -> pd.DataFrame:
    return _empty(DEPLOYMENT_COLUMNS)


# -- sensitivity runs and transfer evaluations (issue 6) -------------------------------------

SENSITIVITY_COLUMNS = ("step", "policy", "eval_protocol")
TRANSFER_COLUMNS = ("step", "policy", "eval_protocol")
XI_PREFIX = "xi_"
_SENS_FAMILIES = {"binomial": ("successes", "trials"), "normal": ("mean", "se")}
_TRANSFER_FAMILIES = {"binomial": ("sim_successes", "sim_trials", "real_successes",
                                   "real_trials"),
                      "normal": ("sim_mean", "sim_se", "real_mean", "real_se")}


def xi_directions(df: pd.DataFrame) -> list[str]:
    """Mismatch directions of a sensitivity table: the ``<direction>`` of every ``xi_<direction>``
    column, in column order (these are the names candidates' ``targets`` refer to)."""
    return [c[len(XI_PREFIX):] for c in df.columns
            if isinstance(c, str) and c.startswith(XI_PREFIX)]


def _is_missing(v: object) -> bool:
    return v is None or (isinstance(v, float | np.floating) and np.isnan(v)) or v is pd.NA


def _present(df: pd.DataFrame, col: str) -> np.ndarray:
    if col not in df.columns:
        return np.zeros(len(df), bool)
    return np.array([not _is_missing(v) for v in df[col].to_numpy(dtype=object)], bool)


def _outcome_family(df: pd.DataFrame, families: dict[str, tuple[str, ...]],
                    table: str) -> str | None:
    """The single outcome family of a table (None when it has no rows).

    A row belongs to a family when any of the family's columns holds a value; a row with values
    of two families, a row with none, and a table mixing families are refused.
    """
    flags = {name: np.column_stack([_present(df, c) for c in cols]).any(axis=1)
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


def _check_columns(df: pd.DataFrame, cols: tuple[str, ...], table: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise InputError(table, f"missing required column(s) {missing}; required: {list(cols)}")


def _frame(df: pd.DataFrame, cols: tuple[str, ...], table: str) -> pd.DataFrame:
    """A DataFrame with every required column, re-indexed 0..n−1 (rows are named by position)."""
    if not isinstance(df, pd.DataFrame):
        raise InputError(table, f"expected a pandas DataFrame, got {type(df).__name__}")
    _check_columns(df, cols, table)
    return df.reset_index(drop=True)


def _base_columns(df: pd.DataFrame, candidates: CandidateSet, table: str) -> pd.DataFrame:
    """step, policy, eval_protocol (equal to E_shared) and the optional ``policy_interface``."""
    out = pd.DataFrame({"step": _integer_column(df, "step", table),
                        "policy": _string_column(df, "policy", table),
                        "eval_protocol": _string_column(df, "eval_protocol", table)})
    for i, proto in enumerate(out["eval_protocol"]):
        if proto != candidates.eval_protocol:
            raise InputError(table, f"eval_protocol {proto!r} differs from the campaign's shared "
                                    f"protocol {candidates.eval_protocol!r} (it would mix "
                                    "task-specification mismatch into δ_J and the "
                                    "sensitivities)", row=i)
    _interface_columns(df, out, candidates, table, ("policy_interface",))
    return out


def _interface_columns(df: pd.DataFrame, out: pd.DataFrame, candidates: CandidateSet,
                       table: str, columns: tuple[str, ...]) -> None:
    """Copy interface columns into ``out`` ("" when not stated), refusing any that differs from
    the campaign's ``policy_interface`` (when the campaign declares one)."""
    expected = candidates.policy_interface
    for col in columns:
        if col not in df.columns:
            continue
        values = np.array(["" if _is_missing(v) else str(v).strip()
                           for v in df[col].to_numpy(dtype=object)], dtype=object)
        if expected is not None:
            for i, v in enumerate(values):
                if v and v != expected:
                    raise InputError(table, f"{col} {v!r} differs from the campaign's policy "
                                            f"interface {expected!r}: a policy with another "
                                            "observation/action interface is not the same "
                                            "function π, so its δ_J and sensitivities are not "
                                            "defined in this campaign", row=i)
        out[col] = values


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
    _check_columns(df, SENSITIVITY_COLUMNS, table)
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
    out = _base_columns(df, candidates, table)
    family = _outcome_family(df, _SENS_FAMILIES, table)
    if family == "binomial":
        _check_columns(df, (*SENSITIVITY_COLUMNS, "successes", "trials"), table)
        out["successes"] = _integer_column(df, "successes", table)
        out["trials"] = _integer_column(df, "trials", table)
        _check_counts(out, "successes", "trials", table)
    else:
        _check_columns(df, (*SENSITIVITY_COLUMNS, "mean"), table)
        out["mean"] = _float_column(df, "mean", table)
        if "se" in df.columns:
            out["se"] = _float_column(df, "se", table)
            bad = np.flatnonzero(out["se"] < 0)
            if bad.size:
                raise InputError(table, f"outcome out of range: se must be >= 0, got "
                                        f"{out['se'][int(bad[0])]}", row=int(bad[0]))
        else:
            out["se"] = 0.0
    for k in directions:
        col = f"{XI_PREFIX}{k}"
        out[col] = _float_column(df, col, table)
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


def _check_counts(out: pd.DataFrame, succ: str, trials: str, table: str) -> None:
    bad = np.flatnonzero(out[trials] < 1)
    if bad.size:
        i = int(bad[0])
        raise InputError(table, f"outcome out of range: {trials} must be >= 1, got "
                                f"{out[trials][i]}", row=i)
    _at_most(out, succ, trials, table, prefix="outcome out of range: ")


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
    _check_columns(df, TRANSFER_COLUMNS, table)
    df = df.reset_index(drop=True)
    if not len(df):
        return df.copy()
    out = _base_columns(df, candidates, table)
    _interface_columns(df, out, candidates, table, ("sim_interface", "real_interface"))
    if "sim_interface" in out and "real_interface" in out:
        for i, (s, r) in enumerate(zip(out["sim_interface"], out["real_interface"],
                                       strict=True)):
            if s and r and s != r:
                raise InputError(table, f"sim_interface {s!r} differs from real_interface {r!r}:"
                                        " the policy is not the same function in sim and real, "
                                        "so δ_J = J_real − J_sim loses its definition", row=i)
    family = _outcome_family(df, _TRANSFER_FAMILIES, table)
    cols = _TRANSFER_FAMILIES[family]
    _check_columns(df, (*TRANSFER_COLUMNS, *cols), table)
    if family == "binomial":
        for col in cols:
            out[col] = _integer_column(df, col, table)
        for domain in ("sim", "real"):
            _check_counts(out, f"{domain}_successes", f"{domain}_trials", table)
    else:
        for domain in ("sim", "real"):
            out[f"{domain}_mean"] = _float_column(df, f"{domain}_mean", table)
            se = f"{domain}_se"
            out[se] = _float_column(df, se, table)
            bad = np.flatnonzero(out[se] <= 0)
            if bad.size:
                raise InputError(table, f"outcome out of range: {se} must be > 0, got "
                                        f"{out[se][int(bad[0])]}", row=int(bad[0]))
    return out


def outcome_family(df: pd.DataFrame) -> str | None:
    """``"binomial"`` or ``"normal"`` for a validated sensitivity or transfer table (None if
    empty)."""
    if not len(df):
        return None
    return "binomial" if ("successes" in df.columns or "sim_successes" in df.columns) \
        else "normal"


def _empty_sensitivity() -> pd.DataFrame:
    return _empty(POLICY_EVAL_COLUMNS)


def _empty_transfer() -> pd.DataFrame:
    return _empty(("step", "policy", "eval_protocol", *_TRANSFER_FAMILIES["binomial"]))


_TABLES = {"paired_evaluations": ("paired", validate_paired),
           "gain_estimates": ("gain_estimates", validate_gain_estimates),
           "policy_evaluations": ("policy_evals", validate_policy_evals),
           "safety_events": ("safety", validate_safety),
           "deployment_safety": ("deployment", validate_deployment),
           "sensitivity_runs": ("sensitivity", validate_sensitivity),
           "transfer_evaluations": ("transfer", validate_transfer)}


@dataclass(frozen=True)
class Evidence:
    """All evidence D_t of a campaign, validated against its candidates and E_shared.

    Attributes
    ----------
    candidates : CandidateSet
    paired : DataFrame
        Paired binary evaluations (see module docstring).
    policy_evals : DataFrame
        Stand-alone evaluations of a policy: ``step, policy, eval_protocol, successes, trials``.
    safety : DataFrame
        Execution-safety events: ``step, candidate, executions, unsafe``.
    deployment : DataFrame
        Deployment-safety trials of a policy: ``step, policy, trials, unsafe`` (never mixed
        with execution-safety events).
    gain_estimates : DataFrame
        Summary-level logit-gain measurements: ``step, candidate, policy, eval_protocol,
        estimate, se`` (see :func:`validate_gain_estimates`).
    sensitivity : DataFrame
        Sensitivity runs ``step, policy, eval_protocol, xi_<direction>..., successes, trials``
        (or ``mean, se``); see :func:`validate_sensitivity`.
    transfer : DataFrame
        Sim/real evaluations of the same policy ``step, policy, eval_protocol, sim_successes,
        sim_trials, real_successes, real_trials`` (or ``sim_mean, sim_se, real_mean,
        real_se``); see :func:`validate_transfer`.

    Use :meth:`append` to add rows; it validates the new rows and returns a new object.
    """

    candidates: CandidateSet
    paired: pd.DataFrame = field(default_factory=empty_paired)
    policy_evals: pd.DataFrame = field(default_factory=empty_policy_evals)
    safety: pd.DataFrame = field(default_factory=empty_safety)
    gain_estimates: pd.DataFrame = field(default_factory=empty_gain_estimates)
    deployment: pd.DataFrame = field(default_factory=empty_deployment)
    sensitivity: pd.DataFrame = field(default_factory=_empty_sensitivity)
    transfer: pd.DataFrame = field(default_factory=_empty_transfer)

    def __post_init__(self) -> None:
        for table, (attr, validate) in _TABLES.items():
            object.__setattr__(self, attr, validate(getattr(self, attr), self.candidates, table))

    def append(self, **new_rows: pd.DataFrame | None) -> Evidence:
        """A new Evidence with rows appended (validated first; ``self`` is unchanged).

        Keywords are attribute names (``paired=``, ``policy_evals=``, ``safety=``, ...) or table
        names (``paired_evaluations=``, ...); ``None`` or empty frames are skipped.
        """
        by_attr = {attr: (table, validate) for table, (attr, validate) in _TABLES.items()}
        changes = {}
        for key, new in new_rows.items():
            if key in _TABLES:
                key = _TABLES[key][0]
            if key not in by_attr:
                raise InputError("evidence", f"unknown table {key!r}; known: "
                                             f"{sorted(by_attr)}")
            if new is None or not len(new):
                continue
            table, validate = by_attr[key]
            clean = validate(new, self.candidates, table=f"{table} (new rows)")
            changes[key] = pd.concat([getattr(self, key), clean], ignore_index=True)
        return replace(self, **changes) if changes else self

    def until(self, step: int) -> Evidence:
        """Evidence available before step ``step`` (rows with ``step < step``)."""
        return replace(self, **{attr: getattr(self, attr)[getattr(self, attr)["step"] < step]
                                for attr, _ in _TABLES.values()})

    def safety_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """(executions, unsafe) summed per candidate, in candidate order."""
        sums = self.safety.groupby("candidate")[["executions", "unsafe"]].sum()
        sums = sums.reindex(self.candidates.ids, fill_value=0)
        return sums["executions"].to_numpy(), sums["unsafe"].to_numpy()

    def deployment_counts(self, policy: str) -> tuple[int, int]:
        """(trials, unsafe) of deployment-safety evidence on ``policy``, summed over rows."""
        rows = self.deployment[self.deployment["policy"] == policy]
        return int(rows["trials"].sum()), int(rows["unsafe"].sum())

    def tables(self) -> dict[str, pd.DataFrame]:
        """The evidence tables by name."""
        return {name: getattr(self, attr) for name, (attr, _) in _TABLES.items()}

    @classmethod
    def from_tables(cls, candidates: CandidateSet,
                    tables: Mapping[str, pd.DataFrame]) -> Evidence:
        """Build from a mapping of table name (see :data:`_TABLES`) to DataFrame."""
        unknown = set(tables) - set(_TABLES)
        if unknown:
            raise InputError("evidence", f"unknown table(s) {sorted(unknown)}; known: "
                                         f"{sorted(_TABLES)}")
        kwargs = {attr: tables[name] for name, (attr, _) in _TABLES.items() if name in tables}
        return cls(candidates, **kwargs)
