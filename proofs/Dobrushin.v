(* Machine-checked proof of the layer bound for attention rollout and its equality case.

   Over any real field R, for a row-stochastic n x n matrix A:
     d_A(i, j) = 1/2 sum_k |A_ik - A_jk|          (dist)
     kappa(A)  = max over pairs (i, j) of d_A(i, j) (kappa, a \big[Num.max/0])
     F         = 1/2 (I + A)                       (layer)
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

End Dobrushin.
