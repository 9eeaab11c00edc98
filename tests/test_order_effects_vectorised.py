"""The order effects of the sampled gains model are one graph for any number of actors: the
vectorised whitening (a scan over actors) has the log density of the per-actor loop it replaced,
and the graph does not grow with the number of candidates."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pytensor.compile.mode import Mode

from belief.inputs.candidate_file import parse_candidate_text
from belief.inputs.tables import validate_paired
from models import gains as gains_module
from models.gains import GainsModel, GainsPriors
from models.priors import whitened_laplace, whitened_normal

EVAL = "pick_place_v1"
FAST = Mode(linker="cvm", optimizer="fast_compile")  # few rewrites: values are tested


class _PerActorLoop(GainsModel):
    """The gains model with the order effects whitened by the former loop over actors."""

    def _order_effects_sampled(self, data, approx, effect, rho, tau_exec, extra_var=None):
        """The per-actor loop (one free variable and potential per actor)."""
        import pymc as pm
        import pytensor.tensor as pt

        pr = self.priors
        n = len(self.pairs)
        mu, sd = self._pair_prior(data)  # the same prior as the scan's
        sparse = pr.gamma_prior == "laplace"
        hist, via = data["history"], approx["via_onehot"]
        var = approx["step_var"] + tau_exec**2
        w = approx["step_both"] / (var if extra_var is None else var + extra_var)
        resid = approx["step_hat"] - (via * effect[None, :]).sum(axis=1) * rho ** data["repeats"]
        gamma = pt.zeros(n)
        for i in range(len(self.actors)):
            idx = np.flatnonzero(self.pair_actor == i)
            if not len(idx):
                continue
            tgt = self.pair_target[idx]
            hw = hist[:, i] * w
            prec = (via[:, tgt] * hw[:, None]).sum(axis=0)
            prec_x = (via[:, tgt] * (hw * resid)[:, None]).sum(axis=0)
            lap = ~self.pair_stated[idx] if sparse else np.zeros(len(idx), dtype=bool)
            if not lap.any():
                x = whitened_normal(f"gamma_{i}", mu[idx], sd[idx], prec, prec_x,
                                    shape=len(idx))
            elif lap.all():
                x = whitened_laplace(f"gamma_lap_{i}", mu[idx], pr.gamma_sd, prec, prec_x,
                                     shape=len(idx))
            else:  # stated pairs stay normal; the others are Laplace
                x = pt.zeros(len(idx))
                k = np.flatnonzero(~lap)
                x = pt.set_subtensor(x[k], whitened_normal(
                    f"gamma_{i}", mu[idx[k]], sd[idx[k]], prec[k], prec_x[k], shape=len(k)))
                k = np.flatnonzero(lap)
                x = pt.set_subtensor(x[k], whitened_laplace(
                    f"gamma_lap_{i}", mu[idx[k]], pr.gamma_sd, prec[k], prec_x[k],
                    shape=len(k)))
            gamma = pt.set_subtensor(gamma[idx], x)
            row = pt.set_subtensor(pt.zeros(len(self.gain_ids))[tgt], x)
            resid = resid - hist[:, i] * (via * row[None, :]).sum(axis=1)
        gamma = pm.Deterministic("gamma", gamma, dims="pair")
        mat = pt.zeros((len(self.actors), len(self.gain_ids)))
        mat = pt.set_subtensor(mat[self.pair_actor, self.pair_target], gamma)
        return gamma, pt.dot(hist, mat), pt.dot(data["est_history"], mat)


def _row(step, m, parent, child, treated=40):
    return {"step": step, "candidate": m, "policy": parent, "eval_protocol": EVAL,
            "control_successes": 30, "control_trials": 100, "treated_successes": treated,
            "treated_trials": 100, "treated_policy": child}


def _stated(cands):
    from dataclasses import replace

    from belief.inputs.interactions import InteractionPrior

    return replace(cands, interactions=(InteractionPrior("sim_refresh", "dr_1e6", -0.1, 0.05),))


def _models(cands, priors):
    """The same model built both ways on an evidence where several actors precede a step."""
    paired = validate_paired(pd.DataFrame([
        _row(0, "si_friction", "pi0", "pi1"), _row(2, "dr_1e6", "pi1", "pi2", 47),
        _row(3, "dr_1e7", "pi2", "pi3", 52), _row(4, "dr_1e6", "pi0", "pi4", 35)]), cands)
    updates = pd.DataFrame([{"step": 1, "candidate": "sim_refresh"}])
    gains = gains_module.encode_estimates
    out = []
    for cls in (_PerActorLoop, GainsModel):
        model = cls(cands, priors, max_policies=6)
        enc = model.encode(paired, model_updates=updates)
        est = gains(pd.DataFrame([{"step": 3, "candidate": "ft_real_100", "policy": "pi3",
                                   "estimate": 0.5, "se": 0.2}]), enc, model.gain_ids,
                    model.max_estimates, model.actors)
        assert model.informed_pairs(enc, est).sum() >= 3  # the whitening sees data
        out.append((model, model.build(enc, est)))
    return out


def _old_point(model, values: dict[str, np.ndarray], z: np.ndarray) -> dict[str, np.ndarray]:
    """The loop model's point: the per-actor free variables cut out of one vector over pairs."""
    lap = ~model.pair_stated if model.priors.gamma_prior == "laplace" else \
        np.zeros(len(model.pairs), dtype=bool)
    point = dict(values)
    for i in range(len(model.actors)):
        idx = np.flatnonzero(model.pair_actor == i)
        if (~lap[idx]).any():
            point[f"z_gamma_{i}"] = z[idx[~lap[idx]]]
        if lap[idx].any():
            point[f"z_gamma_lap_{i}"] = z[idx[lap[idx]]]
    return point


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("kind", ["normal", "laplace_and_stated"])
def test_vectorised_order_effects_have_the_loop_log_density(world_candidates, kind):
    """log p and γ of the vectorised model equal the per-actor loop's at random points (to
    1e-10, relative), with normal pairs and with Laplace pairs beside a stated (normal) one."""
    cands = world_candidates if kind == "normal" else _stated(world_candidates)
    priors = GainsPriors(order_effects=True) if kind == "normal" else \
        GainsPriors(order_effects=True, gamma_prior="laplace", gamma_sd=0.3)
    (old_model, old), (new_model, new) = _models(cands, priors)
    assert old_model.pairs == new_model.pairs
    lap = ~new_model.pair_stated if kind != "normal" else np.zeros(len(new_model.pairs), bool)
    names_new = {v.name for v in new.value_vars}
    assert not any(n.startswith("z_gamma_") and n[8:].isdigit() for n in names_new)
    old_logp, new_logp = old.compile_logp(mode=FAST), new.compile_logp(mode=FAST)
    old_gamma = old.compile_fn(old.replace_rvs_by_values([old["gamma"]])[0],
                               inputs=old.value_vars, on_unused_input="ignore", mode=FAST)
    new_gamma = new.compile_fn(new.replace_rvs_by_values([new["gamma"]])[0],
                               inputs=new.value_vars, on_unused_input="ignore", mode=FAST)
    rng = np.random.default_rng(11)
    for _ in range(5):
        shared = {v.name: rng.normal(0.0, 0.7, new.initial_point()[v.name].shape)
                  for v in new.value_vars if not v.name.startswith("z_gamma_pairs")}
        z = rng.normal(0.0, 1.0, len(new_model.pairs))
        p_new = dict(shared)
        if (~lap).any():
            p_new["z_gamma_pairs"] = z[~lap]
        if lap.any():
            p_new["z_gamma_pairs_lap"] = z[lap]
        p_old = _old_point(old_model, shared, z)
        assert set(p_old) == {v.name for v in old.value_vars}
        # equal up to the rounding of sums taken in another order
        np.testing.assert_allclose(new_logp(p_new), old_logp(p_old), rtol=1e-10, atol=1e-10)
        g_new, g_old = new_gamma(p_new), old_gamma(p_old)
        np.testing.assert_allclose(g_new, g_old, rtol=1e-10, atol=1e-10)


def _synthetic(n: int):
    lenses = ("data", "model", "optimization", "representation")
    text = '[campaign]\nresources = ["compute"]\n' + "".join(
        f'[[candidate]]\nid = "c{i}"\nrole = "adaptation"\nlens = "{lenses[i % 4]}"\n'
        f'method = "M{(i // 4) % 3}"\ncost = {{ compute = 1.0 }}\n' for i in range(n))
    return parse_candidate_text(text, "c.toml").candidates


def test_order_effect_graph_does_not_grow_with_the_candidates():
    """The sampled gains model has the same free variables, potentials and (before rewrites)
    the same number of graph nodes with 24 and 48 candidates (552 against 2256 pairs)."""
    from pytensor.graph.traversal import ancestors

    sizes = []
    for n in (24, 48):
        model = GainsModel(_synthetic(n), GainsPriors(order_effects=True)).build()
        logp = model.logp()
        sizes.append((len(model.free_RVs), len(model.potentials),
                      sum(1 for v in ancestors([logp]) if v.owner is not None)))
    assert sizes[0] == sizes[1]

