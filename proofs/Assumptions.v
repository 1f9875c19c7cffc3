From Dobrushin Require Import Dobrushin.
Print Assumptions pair_identity.
Print Assumptions pair_bound.
Print Assumptions pair_eq.
Print Assumptions layer_bound.
Print Assumptions layer_bound_eq.
