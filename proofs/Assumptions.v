From Dobrushin Require Import Dobrushin Rollout.
Print Assumptions pair_identity.
Print Assumptions pair_bound.
Print Assumptions pair_eq.
Print Assumptions layer_bound.
Print Assumptions layer_bound_eq.
Print Assumptions kappa_mul.
Print Assumptions rollout_bound_factors.
Print Assumptions rollout_bound.
