(* Machine-checked proof of the layer bound for attention rollout and its equality case.

   Over any realFieldType R (an ordered field), for a row-stochastic n x n matrix A:
     d_A(i, j) = 1/2 sum_k |A_ik - A_jk|          (dist)
     kappa(A)  = max over pairs (i, j) of d_A(i, j) (kappa, a \big[Num.max/0])
     F         = 1/2 (I + A)                       (layer; B in the theory chapter)
   See proofs/README.md for the correspondence with the theory chapter. *)
From mathcomp Require Import all_ssreflect all_algebra.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import Order.POrderTheory Order.TotalTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Section Dobrushin.

Variable R : realFieldType.
Variable n : nat.
Implicit Types (A P Q : 'M[R]_n) (i j k : 'I_n).

(* entries >= 0 and every row sums to 1 *)
Definition stochastic A := (forall i k, 0 <= A i k) /\ (forall i, \sum_k A i k = 1).

Definition dist A i j : R := 2^-1 * \sum_k `|A i k - A j k|.

Definition kappa A : R := \big[Num.max/0]_(p : 'I_n * 'I_n) dist A p.1 p.2.

Definition layer A : 'M[R]_n := 2^-1 *: (1%:M + A).

(* the pair (i, j) is mutually self-dominant *)
Definition self_dominant A i j := (A j i <= A i i) && (A i j <= A j j).

(* ---------- the maximum over pairs ---------- *)

Lemma dist_ge0 A i j : 0 <= dist A i j.
Proof. by rewrite mulr_ge0 ?invr_ge0 ?ler0n // sumr_ge0. Qed.

Lemma dist_xx A i : dist A i i = 0.
Proof. by rewrite /dist big1 ?mulr0 // => k _; rewrite subrr normr0. Qed.

Lemma kappa_ge0 A : 0 <= kappa A.
Proof.
apply: (big_ind (fun x => 0 <= x)) => // [x y x0 y0|p _]; first by rewrite le_maxr x0.
exact: dist_ge0.
Qed.

Lemma le_bigmax_seq (T : eqType) (r : seq T) (f : T -> R) x :
  x \in r -> f x <= \big[Num.max/0]_(y <- r) f y.
Proof.
elim: r => //= y r IH; rewrite inE big_cons => /orP[/eqP->|/IH h].
  by rewrite le_maxr lexx.
by rewrite le_maxr h orbT.
Qed.

Lemma dist_le_kappa A i j : dist A i j <= kappa A.
Proof.
exact: (le_bigmax_seq (fun p : 'I_n * 'I_n => dist A p.1 p.2) (mem_index_enum (i, j))).
Qed.

Lemma kappa_le A c : 0 <= c -> (forall i j, dist A i j <= c) -> kappa A <= c.
Proof.
move=> c0 hc; apply: (big_ind (fun x => x <= c)).
- exact: c0.
- by move=> x y xc yc; rewrite le_maxl xc.
- by move=> [i j] _; exact: hc.
Qed.

Lemma kappa_attained A : kappa A = 0 \/ exists i j, kappa A = dist A i j.
Proof.
apply: (big_ind (fun x => x = 0 \/ exists i j, x = dist A i j)).
- by left.
- by move=> x y hx hy; case: leP.
- by move=> [i j] _; right; exists i, j.
Qed.

(* ---------- facts about stochastic matrices ---------- *)

Lemma sum_pair (f : 'I_n -> R) i j : i != j ->
  \sum_k f k = f i + f j + \sum_(k | (k != i) && (k != j)) f k.
Proof.
move=> ij; rewrite (bigD1 i) //= (bigD1 j) 1?eq_sym //= addrA.
by congr (_ + _); apply: eq_bigl => k.
Qed.

Lemma entry_le1 A i k : stochastic A -> A i k <= 1.
Proof.
move=> [A0 A1]; rewrite -(A1 i) (bigD1 k) //= ler_addl.
by rewrite sumr_ge0.
Qed.

Lemma layerE A i k : layer A i k = 2^-1 * ((i == k)%:R + A i k).
Proof. by rewrite !mxE. Qed.

(* ---------- (1) the pair identity ---------- *)

Lemma half_half : (2^-1 * 2^-1 : R) = 4^-1.
Proof. by rewrite -invfM -natrM. Qed.

Lemma half_norm x : `|2^-1 * x| = 2^-1 * `|x| :> R.
Proof. by rewrite normrM ger0_norm // invr_ge0 ler0n. Qed.

Theorem pair_identity A i j : stochastic A -> i != j ->
  dist (layer A) i j =
  4^-1 * (2 + (A i i - A j i) + (A j j - A i j)
          + \sum_(k | (k != i) && (k != j)) `|A i k - A j k|).
Proof.
move=> sA ij; rewrite /dist (sum_pair _ ij) !layerE eqxx eq_sym (negbTE ij) eqxx.
rewrite (eq_bigr (fun k => 2^-1 * `|A i k - A j k|)); last first.
  move=> k /andP[ki kj]; rewrite !layerE eq_sym (negbTE ki) eq_sym (negbTE kj).
  by rewrite -mulrBr half_norm !add0r.
rewrite -mulr_sumr -!mulrBr !half_norm -!mulrDr mulrA half_half.
congr (_ * (_ + _)).
have t1 : (true%:R : R) = 1 by [].
have f0 : (false%:R : R) = 0 by [].
have ge1 x y : 0 <= 1 + (A x x - A y x).
  by rewrite addrCA addr_ge0 ?(proj1 sA) // subr_ge0 (entry_le1 _ _ sA).
rewrite t1 f0 !add0r [`|A i j - _|]distrC -!addrA !ger0_norm //.
by rewrite addrACA !addrA.
Qed.

Lemma half_one_plus_dist A i j : i != j ->
  2^-1 * (1 + dist A i j) =
  4^-1 * (2 + `|A i i - A j i| + `|A j j - A i j|
          + \sum_(k | (k != i) && (k != j)) `|A i k - A j k|).
Proof.
move=> ij; rewrite /dist (sum_pair _ ij) [`|A i j - A j j|]distrC.
rewrite -half_half -mulrA; congr (_ * _).
have half_aux (s : R) : 1 + 2^-1 * s = 2^-1 * (2 + s).
  by rewrite mulrDr mulVf ?pnatr_eq0.
by rewrite half_aux ![in LHS]addrA.
Qed.

Lemma add_eq_norm (x y : R) : (x + y == `|x| + `|y|) = (0 <= x) && (0 <= y).
Proof.
rewrite !ger0_def eq_sym -subr_eq0 opprD addrACA.
by rewrite paddr_eq0 ?subr_ge0 ?ler_norm // !subr_eq0.
Qed.

Lemma half1_gt0 x : 0 <= x -> 0 < 2^-1 * (1 + x) :> R.
Proof.
by move=> x0; rewrite mulr_gt0 ?invr_gt0 ?ltr0n // (lt_le_trans ltr01) // ler_addl.
Qed.

(* (1) d_F(i, j) <= 1/2 (1 + d_A(i, j)), for every pair *)
Theorem pair_bound A i j : stochastic A ->
  dist (layer A) i j <= 2^-1 * (1 + dist A i j).
Proof.
move=> sA; case: (eqVneq i j) => [<-|ij].
  by rewrite dist_xx ltW // half1_gt0 // dist_ge0.
rewrite pair_identity // half_one_plus_dist // ler_wpmul2l ?invr_ge0 ?ler0n //.
by rewrite ler_add2r ler_add ?ler_norm // ler_add2l ler_norm.
Qed.

(* (1) equality iff the pair is mutually self-dominant *)
Theorem pair_eq A i j : stochastic A -> i != j ->
  (dist (layer A) i j == 2^-1 * (1 + dist A i j)) = self_dominant A i j.
Proof.
move=> sA ij; rewrite pair_identity // half_one_plus_dist //.
rewrite (inj_eq (mulfI _)) ?invr_eq0 ?pnatr_eq0 // (inj_eq (addIr _)).
rewrite -(addrA 2 (A i i - A j i)) -(addrA 2 `|A i i - A j i|) (inj_eq (addrI _)).
by rewrite add_eq_norm !subr_ge0.
Qed.

(* (2) the layer bound *)
Theorem layer_bound A : stochastic A -> kappa (layer A) <= 2^-1 * (1 + kappa A).
Proof.
move=> sA; apply: kappa_le => [|i j]; first by rewrite ltW // half1_gt0 // kappa_ge0.
apply: le_trans (pair_bound _ _ sA) _.
by rewrite ler_wpmul2l ?invr_ge0 ?ler0n // ler_add2l dist_le_kappa.
Qed.

(* (3) the equality case *)
Theorem layer_bound_eq A : stochastic A ->
  kappa (layer A) = 2^-1 * (1 + kappa A) <->
  exists i j, [/\ i != j, dist A i j = kappa A & self_dominant A i j].
Proof.
move=> sA; split; last first.
  move=> [i [j [ij dk sd]]]; apply: le_anti; rewrite layer_bound //=.
  by rewrite -dk -(eqP (etrans (pair_eq sA ij) sd)) dist_le_kappa.
move=> e; have pos := half1_gt0 (kappa_ge0 A).
case: (kappa_attained (layer A)) => [k0|[i [j kij]]].
  by move: pos; rewrite -e k0 ltxx.
case: (eqVneq i j) => [eij|ij].
  by move: pos; rewrite -e kij eij dist_xx ltxx.
have h1 := pair_bound i j sA.
have h2 : 2^-1 * (1 + dist A i j) <= 2^-1 * (1 + kappa A).
  by rewrite ler_wpmul2l ?invr_ge0 ?ler0n // ler_add2l dist_le_kappa.
have eF : dist (layer A) i j = 2^-1 * (1 + dist A i j).
  by apply: le_anti; rewrite h1 /= -kij e.
have eA : 2^-1 * (1 + dist A i j) = 2^-1 * (1 + kappa A) by rewrite -eF -kij e.
exists i, j; split => //.
  have h2n0 : (2^-1 : R) != 0 by rewrite invr_eq0 pnatr_eq0.
  by move: eA => /(mulfI h2n0) /addrI.
by rewrite -pair_eq // eF.
Qed.

End Dobrushin.
