#!/bin/bash
# 2026-12-07: the shipped model's reports, one after another on a quiet machine (nothing else ran).
# OLD: the 2026-12-06 model directory (git 285e745's streamdec/assets/synthetic-en), for the cost
# measured right after on the same machine.
set -e
cd main
O=bench/results/2026-12-07-builtin-model; OLD=${OLD:-/tmp/2026-12-06-encoder-state-rows-model}
H=recipes/synthetic-en/data/dev-real/heldout
python bench/realvoice.py --methods greedy,modified_beam,accurate --capture --synthetic \
  --heldout $H --out $O/realvoice-shipped.json
python bench/realvoice.py --model $OLD --methods greedy,modified_beam,accurate \
  --shift-methods none --out $O/realvoice-stop48-timing.json
python bench/search.py --runs 1 --timing-utts 16 --out $O/search-shipped.json
python bench/load.py --streams 100,200 --seconds 30 --runs 1 --out $O/load-builtin.json
echo BENCH DONE
