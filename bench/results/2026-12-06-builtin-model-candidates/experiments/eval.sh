#!/bin/bash
# PyTorch greedy, whole utterances, on held-out real speakers + the three synthetic dev sets
cd main
export PYTHONPATH=recipes/synthetic-en
R=recipes/synthetic-en; E=$R/exp; DEV=$R/data/dev-all
A=$E/ab-narrow/last.pt; B=$E/ab-wide512/last.pt
run() { name=$1; shift; echo "== $name"; python $R/average.py $E/mix-$name.pt "$@" --dev $DEV 2>&1 | grep -v Warn | grep -v "ckpt = "; }
run shipped   $E/shipped-wide512.pt $B --weights 1 0
run A         $A
run B         $B
run A.7s3c    $E/2026-12-01-model-model.pt $A --weights 0.3 0.7
run B.7s3c    $E/2026-12-01-model-wide512.pt $B --weights 0.3 0.7
run A.5s3c    $E/2026-12-01-model-model.pt $A --weights 0.5 0.5
run B.5s3c    $E/2026-12-01-model-wide512.pt $B --weights 0.5 0.5
run A.7ship   streamdec/assets/synthetic-en/model.pt $A --weights 0.3 0.7
run B.7ship   $E/shipped-wide512.pt $B --weights 0.3 0.7
echo EVAL DONE
