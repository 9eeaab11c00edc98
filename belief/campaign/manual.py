"""A "manual" world: the user runs the chosen intervention for real and enters what happened.

Use it from a notebook with a callback, or step by step::

    world = ManualWorld(load_candidates("candidates.toml"))
    campaign = Campaign(world, CampaignSettings(horizon=5), out="my_campaign")
    decision = campaign.decide_next()                  # look at decision_table(decision)
    outcome = world.outcome(decision.attrs["chosen"], campaign.step_index,
                            control=(41, 100), treated=(55, 100), unsafe=(0, 20))
    campaign.apply(decision, outcome)                  # logged; repeat

or from the command line with ``belief manual --candidates FILE --out DIR`` (prompts for each
outcome; ``belief manual --resume DIR`` continues).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import xarray as xr

from belief.campaign.world import Outcome
from belief.errors import InputError
from belief.inputs.candidates import CandidateSet

__all__ = ["ManualWorld", "prompt_outcome"]


@dataclass
class ManualWorld:
    """A world whose outcomes are entered by the user.

    Parameters
    ----------
    candidates : CandidateSet
        Must carry the starting budget (``[budget]`` in the TOML file).
    initial_policy : str
    initial_tables : mapping of table name → DataFrame
        Evidence available before the first step.
    weights : mapping resource → λ, optional
        The campaign's default fixed λ (e.g. the candidate file's ``[weights]``).
    ask : callable (world, candidate, step) → Outcome, optional
        Called by :meth:`execute`; default: :func:`prompt_outcome` (interactive input).
    """

    candidates: CandidateSet
    initial_policy: str = "pi0"
    initial_tables: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    weights: Mapping[str, float] | None = None
    ask: Callable[[ManualWorld, str, int], Outcome] | None = None

    def __post_init__(self) -> None:
        if self.candidates.budget is None:
            raise InputError(self.candidates.source, "[budget] (the starting budget) is "
                                                     "required for a campaign")
        self.policy = self.initial_policy
        self.n_policies = 1

    @property
    def initial_budget(self) -> xr.DataArray:
        return self.candidates.budget

    @property
    def weight_values(self) -> dict[str, float] | None:
        return None if self.weights is None else dict(self.weights)

    def initial_evidence(self) -> dict[str, pd.DataFrame]:
        return dict(self.initial_tables)

    def describe(self) -> dict[str, Any]:
        return {"kind": "manual"}

    def deployment_evaluation(self, step: int, policy: str) -> pd.DataFrame | None:
        """None: deployment trials of a real campaign are entered as evidence, not run here."""
        return None

    def expected_gain(self, candidate_id: str) -> float | None:
        """None: the truth of a real campaign is unknown."""
        return None

    def true_success(self, policy: str) -> float | None:
        """None: the truth of a real campaign is unknown."""
        return None

    def outcome(self, candidate: str, step: int, *, control: tuple[int, int] | None = None,
                treated: tuple[int, int] | None = None, unsafe: tuple[int, int] | None = None,
                estimates: Mapping[str, float] | None = None,
                cost: Mapping[str, float] | None = None,
                new_policy: str | None = None) -> Outcome:
        """Build the outcome of executing ``candidate`` from what was observed.

        Parameters
        ----------
        control, treated : (successes, trials)
            The paired evaluation of a policy-changing candidate (both required for one).
        unsafe : (unsafe, executions)
            Execution-safety events of a hardware candidate.
        estimates : mapping informed candidate → logit-gain estimate
            What a diagnosis measured (its ``measurement_se`` is the standard error).
        cost : mapping resource → realised amount
            Default: the candidate's nominal cost.
        new_policy : str
            Name of the policy produced (default ``pi<n>``).
        """
        c = self.candidates[candidate]
        proto = self.candidates.eval_protocol
        paired = safety = estimates_df = pd.DataFrame()
        policy_after = self.policy
        if c.changes_policy:
            if control is None or treated is None:
                raise InputError("outcome", f"{candidate!r} changes the policy: give the paired "
                                            "evaluation as control=(successes, trials) and "
                                            "treated=(successes, trials)")
            policy_after = new_policy or f"pi{self.n_policies}"
            paired = pd.DataFrame([{
                "step": step, "candidate": candidate, "policy": self.policy,
                "eval_protocol": proto, "control_successes": control[0],
                "control_trials": control[1], "treated_successes": treated[0],
                "treated_trials": treated[1], "treated_policy": policy_after}])
        if unsafe is not None:
            if not c.drives_hardware:
                raise InputError("outcome", f"{candidate!r} does not drive hardware: no "
                                            "execution-safety events")
            safety = pd.DataFrame([{"step": step, "candidate": candidate,
                                    "executions": unsafe[1], "unsafe": unsafe[0],
                                    "policy": self.policy}])
        if c.informs:
            missing = [t for t in c.informs if not estimates or t not in estimates]
            if missing:
                raise InputError("outcome", f"{candidate!r} informs {list(c.informs)}: give "
                                            f"estimates for {missing}")
            estimates_df = pd.DataFrame([{
                "step": step, "candidate": t, "policy": self.policy, "eval_protocol": proto,
                "estimate": float(estimates[t]), "se": float(c.measurement_se),
                "source": candidate} for t in c.informs])
        if estimates:
            bad = {t: v for t, v in estimates.items() if not _finite(v)}
            if bad:
                raise InputError("outcome", f"estimates must be finite numbers, got {bad}")
        if cost is None:
            realised = {k: float(v) for k, v in c.cost.items()}
        else:
            bad = {k: v for k, v in cost.items() if not _finite(v) or float(v) < 0}
            if bad:
                raise InputError("outcome", f"realised cost must be a finite number >= 0 for "
                                            f"every resource, got {bad}")
            realised = {k: float(v) for k, v in cost.items()}
        return Outcome(candidate, step, paired, safety, realised, policy_after,
                       gain_estimates=estimates_df)

    def execute(self, candidate: str, step: int) -> Outcome:
        """Ask for the outcome of executing ``candidate`` (see ``ask``)."""
        ask = self.ask or prompt_outcome()
        return ask(self, candidate, step)

    def observe(self, outcome: Outcome) -> None:
        """Called by the campaign when it applies an outcome: the world moves to the policy the
        outcome produced."""
        if outcome.policy != self.policy:
            self.n_policies += 1
        self.policy = outcome.policy

    def resume_step(self, logged: Outcome) -> None:
        """Resuming a log: the logged outcome is what happened (see :meth:`observe`)."""
        self.observe(logged)


def prompt_outcome(input_fn: Callable[[str], str] | None = None,
                   print_fn: Callable[[str], None] = print,
                   attempts: int = 3) -> Callable[[ManualWorld, str, int], Outcome]:
    """An ``ask`` callback that prompts for each observed quantity (re-asks on bad input).

    A realised cost must be a finite number ≥ 0 and an estimate a finite number ("nan" and
    "inf" are re-asked); the end of input (Ctrl-D, a script that runs out) before an answer is
    an :class:`~belief.errors.InputError`: the step is not applied and the log keeps the steps
    before it."""

    def read(prompt: str, label: str) -> str:
        try:  # ``input`` looked up at the call: a redirected stdin or a test's input works
            return (input_fn or input)(prompt).strip()
        except EOFError:
            raise InputError("manual input", f"{label}: the input ended before an answer (the "
                                             "step was not applied; the log keeps the steps "
                                             "before it)") from None

    def ask_pair(label: str) -> tuple[int, int]:
        for _ in range(attempts):
            text = read(f"  {label} as 'successes/trials': ", label)
            a, sep, b = text.partition("/")
            try:
                k, n = int(a), int(b)
                if sep and 0 <= k <= n:
                    return k, n
            except ValueError:
                pass
            print_fn(f"  could not read {text!r}: expected two integers k/n with 0 <= k <= n")
        raise InputError("manual input", f"{label}: no valid answer after {attempts} attempts")

    def ask_float(label: str, default: float | None = None, minimum: float | None = None
                  ) -> float:
        rule = "a finite number" + ("" if minimum is None else f" >= {minimum:g}")
        for _ in range(attempts):
            hint = f" [{default:g}]" if default is not None else ""
            text = read(f"  {label}{hint}: ", label)
            if not text and default is not None:
                return default
            try:
                value = float(text)
            except ValueError:
                value = float("nan")
            if math.isfinite(value) and (minimum is None or value >= minimum):
                return value
            print_fn(f"  could not read {text!r}: expected {rule}")
        raise InputError("manual input", f"{label}: no valid answer after {attempts} attempts")

    def ask(world: ManualWorld, candidate: str, step: int) -> Outcome:
        c = world.candidates[candidate]
        print_fn(f"step {step}: run {candidate!r} ({c.recipe or c.method}, {c.batch}) from "
                 f"policy {world.policy!r}, then enter what happened")
        kw: dict[str, Any] = {}
        if c.changes_policy:
            kw["control"] = ask_pair(f"control policy {world.policy!r}")
            kw["treated"] = ask_pair("treated policy")
        if c.drives_hardware:
            kw["unsafe"] = ask_pair("unsafe executions")
        if c.informs:
            kw["estimates"] = {t: ask_float(f"estimated logit gain of {t!r}") for t in c.informs}
        kw["cost"] = {r: ask_float(f"realised cost {r}", float(c.cost.get(r, 0.0)), 0.0)
                      for r in world.candidates.resources}
        return world.outcome(candidate, step, **kw)

    return ask


def _finite(v: object) -> bool:
    try:
        return not isinstance(v, bool) and math.isfinite(float(v))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
