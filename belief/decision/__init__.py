"""Decision: the state s_t and the transition T, functionals φ, resource weights λ, scores,
the safety gate, CVU, the decision entry point and the allocation rules.

Works on a belief q_t (joint draws) and knows nothing about how it was fitted.
"""
