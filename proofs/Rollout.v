(* Submultiplicativity kappa(PQ) <= kappa(P) kappa(Q) for stochastic P, Q, and the rollout bound
   kappa(F_L ... F_1) <= prod_l 1/2 (1 + kappa(A_l)), with the definitions of Dobrushin.v. *)
From mathcomp Require Import all_ssreflect all_algebra.
From Dobrushin Require Import Dobrushin.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import Order.POrderTheory Order.TotalTheory GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Section Rollout.

Variable R : realFieldType.
Variable n : nat.
Implicit Types (A P Q : 'M[R]_n).

Lemma norm_plus_ge0 (x : R) : 0 <= `|x| + x.
Proof. by rewrite -{2}(opprK x) subr_ge0 -normrN ler_norm. Qed.

Lemma norm_minus_ge0 (x : R) : 0 <= `|x| - x.
Proof. by rewrite subr_ge0 ler_norm. Qed.

Lemma mix_bound (v : 'I_n -> R) Q : \sum_m v m = 0 ->
  \sum_k `|\sum_m v m * Q m k| <= (\sum_m `|v m|) * kappa Q.
Proof.
move=> v0; set s := \sum_m `|v m|.
pose p m := `|v m| + v m; pose q m := `|v m| - v m.
have sp : \sum_m p m = s by rewrite big_split /= v0 addr0.
have sq : \sum_m q m = s by rewrite sumrB v0 subr0.
have pq m : p m - q m = 2 * v m.
  by rewrite /p /q opprB addrC addrA subrK -mulr2n mulr_natl.
have key k : s * (2 * \sum_m v m * Q m k)
             = \sum_m \sum_l p m * q l * (Q m k - Q l k).
  transitivity (s * (\sum_m p m * Q m k) - s * (\sum_l q l * Q l k)).
    rewrite -mulrBr -sumrB mulr_sumr; congr (_ * _); apply: eq_bigr => m _.
    by rewrite -mulrBl pq mulrA.
  have -> : \sum_m \sum_l p m * q l * (Q m k - Q l k)
          = \sum_m (p m * Q m k * (\sum_l q l) - p m * (\sum_l q l * Q l k)).
    apply: eq_bigr => m _; rewrite !mulr_sumr -sumrB; apply: eq_bigr => l _.
    by rewrite mulrBr mulrAC mulrA.
  by rewrite sumrB -!mulr_suml sp sq mulrC.
have p0 m : 0 <= p m := norm_plus_ge0 _.
have q0 m : 0 <= q m := norm_minus_ge0 _.
have s0 : 0 <= s by rewrite sumr_ge0.
have two0 : (0 : R) <= 2 by rewrite ler0n.
have step1 : \sum_k s * (2 * `|\sum_m v m * Q m k|)
             <= \sum_k \sum_m \sum_l p m * q l * `|Q m k - Q l k|.
  apply: ler_sum => k _.
  have -> : s * (2 * `|\sum_m v m * Q m k|) = `|s * (2 * \sum_m v m * Q m k)|.
    by rewrite !normrM (ger0_norm s0) (ger0_norm two0).
  rewrite key; apply: le_trans (ler_norm_sum _ _ _) _; apply: ler_sum => m _.
  apply: le_trans (ler_norm_sum _ _ _) _; apply: ler_sum => l _.
  by rewrite normrM ger0_norm ?mulr_ge0.
have step2 : \sum_k \sum_m \sum_l p m * q l * `|Q m k - Q l k|
             <= \sum_m \sum_l p m * q l * (2 * kappa Q).
  rewrite exchange_big; apply: ler_sum => m _ /=; rewrite exchange_big; apply: ler_sum => l _ /=.
  rewrite -mulr_sumr ler_wpmul2l ?mulr_ge0 //.
  apply: le_trans (_ : _ <= 2 * dist Q m l) _.
    by rewrite /dist mulrA mulfV ?pnatr_eq0 // mul1r.
  by rewrite ler_wpmul2l // dist_le_kappa.
have step3 : \sum_m \sum_l p m * q l * (2 * kappa Q) = s * (2 * (s * kappa Q)).
  rewrite (eq_bigr (fun m => p m * s * (2 * kappa Q))); last first.
    by move=> m _; rewrite -mulr_suml -mulr_sumr sq.
  by rewrite -mulr_suml -mulr_suml sp -(mulrA s s) (mulrCA s 2).
have comb : s * (2 * \sum_k `|\sum_m v m * Q m k|) <= s * (2 * (s * kappa Q)).
  by rewrite mulr_sumr mulr_sumr -step3 (le_trans step1 step2).
case: (eqVneq s 0) => [sz|snz].
  have vz m : v m = 0.
    move: sz => /eqP; rewrite psumr_eq0 // => /allP /(_ m (mem_index_enum m)) /=.
    by rewrite normr_eq0 => /eqP.
  rewrite sz mul0r big1 // => k _; rewrite big1 ?normr0 // => m _.
  by rewrite vz mul0r.
have spos : 0 < s by rewrite lt_neqAle eq_sym snz s0.
by move: comb; rewrite ler_pmul2l // ler_pmul2l // ltr0n.
Qed.

Lemma stochastic_mul P Q : stochastic P -> stochastic Q -> stochastic (P *m Q).
Proof.
move=> [P0 P1] [Q0 Q1]; split=> [i k|i]; first by rewrite mxE sumr_ge0 // => m _; rewrite mulr_ge0.
rewrite (eq_bigr (fun k => \sum_m P i m * Q m k)); last by move=> k _; rewrite mxE.
rewrite exchange_big /= -(P1 i); apply: eq_bigr => m _.
by rewrite -mulr_sumr Q1 mulr1.
Qed.

(* (4) submultiplicativity: only the left factor needs to be stochastic *)
Theorem kappa_mul P Q : stochastic P -> kappa (P *m Q) <= kappa P * kappa Q.
Proof.
move=> sP; apply: kappa_le => [|i j]; first by rewrite mulr_ge0 ?kappa_ge0.
have e k : (P *m Q) i k - (P *m Q) j k = \sum_m (P i m - P j m) * Q m k.
  by rewrite !mxE -sumrB; apply: eq_bigr => m _; rewrite mulrBl.
rewrite /dist (eq_bigr (fun k => `|\sum_m (P i m - P j m) * Q m k|)); last first.
  by move=> k _; rewrite e.
apply: le_trans (_ : 2^-1 * ((\sum_m `|P i m - P j m|) * kappa Q) <= _).
  rewrite ler_wpmul2l ?invr_ge0 ?ler0n //; apply: mix_bound.
  by rewrite sumrB !(proj2 sP) subrr.
rewrite mulrA ler_wpmul2r ?kappa_ge0 //.
exact: dist_le_kappa.
Qed.

Lemma stochastic1 : stochastic (1%:M : 'M[R]_n).
Proof.
split=> [i k|i]; first by rewrite mxE ler0n.
rewrite (bigD1 i) //= big1 ?addr0 ?mxE ?eqxx //.
by move=> k ki; rewrite mxE eq_sym (negbTE ki).
Qed.

Lemma layer_stochastic A : stochastic A -> stochastic (layer A).
Proof.
move=> [A0 A1]; split=> [i k|i].
  by rewrite layerE mulr_ge0 ?invr_ge0 ?ler0n // addr_ge0 ?ler0n.
rewrite (eq_bigr (fun k => 2^-1 * ((i == k)%:R + A i k))); last by move=> k _; rewrite layerE.
rewrite -mulr_sumr big_split /= A1 (bigD1 i) //= big1 ?addr0 ?eqxx.
  by rewrite mulVf // pnatr_eq0.
by move=> k ki; rewrite eq_sym (negbTE ki).
Qed.

Lemma kappa_le1 P : stochastic P -> kappa P <= 1.
Proof.
move=> [P0 P1]; apply: kappa_le => [|i j]; first exact: ler01.
rewrite /dist; apply: le_trans (_ : 2^-1 * (\sum_k (P i k + P j k)) <= _).
  rewrite ler_wpmul2l ?invr_ge0 ?ler0n //; apply: ler_sum => k _.
  by apply: le_trans (ler_norm_sub _ _) _; rewrite !ger0_norm.
by rewrite big_split /= !P1 mulVf ?pnatr_eq0.
Qed.

(* the rollout of layers [:: A_1; ...; A_L] is F_L *m ... *m F_1, with F_l = layer A_l *)
Definition rollout (As : seq 'M[R]_n) : 'M[R]_n := foldr (fun A M => M *m layer A) 1%:M As.

Lemma rollout_stochastic (As : seq 'M[R]_n) :
  (forall A, A \in As -> stochastic A) -> stochastic (rollout As).
Proof.
elim: As => [_|A As IH sAs] /=; first exact: stochastic1.
apply: stochastic_mul; last by apply: layer_stochastic; apply: sAs; rewrite mem_head.
by apply: IH => B B_in; apply: sAs; rewrite in_cons B_in orbT.
Qed.

(* (4) the rollout bound, first inequality: kappa(F_L ... F_1) <= prod_l kappa(F_l) *)
Theorem rollout_bound_factors (As : seq 'M[R]_n) : (forall A, A \in As -> stochastic A) ->
  kappa (rollout As) <= \prod_(A <- As) kappa (layer A).
Proof.
elim: As => [_|A As IH sAs]; first by rewrite big_nil; apply: kappa_le1; exact: stochastic1.
have sAs' : forall B, B \in As -> stochastic B.
  by move=> B B_in; apply: sAs; rewrite in_cons B_in orbT.
rewrite big_cons /=; apply: le_trans (kappa_mul _ (rollout_stochastic sAs')) _.
by rewrite mulrC ler_pmul ?kappa_ge0 // IH.
Qed.

(* (4) the rollout bound: kappa(F_L ... F_1) <= prod_l 1/2 (1 + kappa(A_l)) *)
Theorem rollout_bound (As : seq 'M[R]_n) : (forall A, A \in As -> stochastic A) ->
  kappa (rollout As) <= \prod_(A <- As) (2^-1 * (1 + kappa A)).
Proof.
elim: As => [_|A As IH sAs]; first by rewrite big_nil; apply: kappa_le1; exact: stochastic1.
have sA : stochastic A by apply: sAs; rewrite mem_head.
have sAs' : forall B, B \in As -> stochastic B.
  by move=> B B_in; apply: sAs; rewrite in_cons B_in orbT.
rewrite big_cons /=; apply: le_trans (kappa_mul _ (rollout_stochastic sAs')) _.
rewrite mulrC ler_pmul ?kappa_ge0 ?layer_bound //.
exact: IH.
Qed.

End Rollout.
