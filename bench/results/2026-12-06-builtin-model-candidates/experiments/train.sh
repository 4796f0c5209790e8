#!/bin/bash
# A/B at equal wall-clock, one core each: A = the shipped model fine-tuned on, B = it widened to 512 cells
set -e
cd main
export PYTHONPATH=recipes/synthetic-en
R=recipes/synthetic-en; D=$R/data
mkdir -p $D/train-mix && cd $D/train-mix
for f in ../train-en/shard-real-en-c0-*.npz; do ln -sf $f; done
for f in ../train-syn22/shard-0*.npz; do ln -sf $f shard-syn22-${f##*/shard-}; done
cd main
ln -sfn ../dev/espeak $D/dev-real/espeak
python $R/widen.py streamdec/assets/synthetic-en/model.pt $R/exp/wide512-init.pt --hidden 512
common="--data $D/train-mix --dev $D/dev-real --loss-type mixed --budget-min ${BUDGET:-95} --lr 4e-4 --warmup 100 --curriculum 0 --eval-min 12 --select-by heldout+espeak --threads 1 --prune-range 10 --prune-from-step 80"
mkdir -p $R/exp/ab-narrow $R/exp/ab-wide512
python $R/train.py $common --exp $R/exp/ab-narrow --init streamdec/assets/synthetic-en/model.pt > $R/exp/ab-narrow/train.log 2>&1 &
python $R/train.py $common --exp $R/exp/ab-wide512 --init $R/exp/wide512-init.pt > $R/exp/ab-wide512/train.log 2>&1 &
wait
echo TRAIN DONE
