"""Work done per decision: how often settings are parsed and checked, and how deep the call path is.

Runs ``belief decide BELIEF --functional lcb:0.2 --beta 1 --weights …`` in-process under a
profiler and counts

- parses of the functional (constructions of ``Functional``: the parse itself validates);
- validations of λ (``check_weights`` in the old layout, ``resource_vector(what="λ")`` now);
- validations of β;
- the call depth from ``cmd_decide`` to the reduction of the draws (``apply_functional`` /
  ``weighted_columns`` / ``weighted_phi``) and the number of module changes on that path;

and then the same for one step of the demo's campaign loop (``Campaign.decide_next``).  Works on
any checkout (old and new layouts) so that two trees can be compared::

    uv run python benchmarks/bench_house.py --belief belief.nc
    (cd /tmp/old && uv run python /path/to/benchmarks/bench_house.py --belief belief.nc)
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from collections import Counter
from pathlib import Path

REDUCERS = {"apply_functional", "weighted_columns", "weighted_phi"}


def profile(fn) -> dict[str, object]:
    counts: Counter[str] = Counter()
    depth: dict[str, int] = {}

    def hook(frame, event, arg):
        if event != "call":
            return
        name = frame.f_code.co_name
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(("belief", "models")):
            return
        if name == "__post_init__" and type(frame.f_locals.get("self")).__name__ == "Functional":
            counts["functional parsed"] += 1
        elif name == "check_weights" or (name == "resource_vector"
                                         and frame.f_locals.get("what") == "λ"):
            counts["λ validated"] += 1
        elif name == "check_beta" or (name == "real" and frame.f_locals.get("name") in
                                      ("beta", "--beta")):
            counts["β validated"] += 1
        if name in REDUCERS and "depth" not in depth:
            chain, f = [], frame
            while f is not None and f.f_code.co_name not in ("cmd_decide", "decide_next"):
                chain.append(f.f_globals.get("__name__", ""))
                f = f.f_back
            if f is not None:
                depth["depth"] = len(chain)
                depth["module changes"] = sum(a != b for a, b in itertools.pairwise(chain))

    sys.setprofile(hook)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return {**counts, **depth}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--belief", required=True, help="a belief file written by belief fit")
    parser.add_argument("--skip-campaign", action="store_true")
    args = parser.parse_args()
    try:
        from belief.cli.main import main as cli
    except ImportError:  # the flat layout
        from belief.cli import main as cli
    out = Path(tempfile.mkdtemp())
    argv = ["decide", args.belief, "--functional", "lcb:0.2", "--beta", "1", "--weights",
            "real_h=0.01,compute=0.0002,eng_h=0.004", "--cvu-outcomes", "64", "--out",
            str(out / "decision")]
    print("belief decide:", profile(lambda: cli(argv)))
    if args.skip_campaign:
        return
    try:
        from belief.campaign.loop import Campaign, CampaignSettings
        from belief.campaign.synthetic import SyntheticWorld
        from belief.decision.settings import CVUSettings
        from belief.posterior.fitter import FitSettings
    except ImportError:
        from belief.cvu import CVUSettings
        from belief.fitting import FitSettings
        from belief.world import SyntheticWorld

        from belief.campaign import Campaign, CampaignSettings
    settings = CampaignSettings(horizon=6, beta=1.0, functional="lcb:0.2",
                                fit=FitSettings(draws=200, tune=200),
                                cvu=CVUSettings(n_outcomes=64, max_refits=0))
    campaign = Campaign(SyntheticWorld(seed=0), settings)
    print("one campaign step:", profile(campaign.decide_next))


if __name__ == "__main__":
    main()
