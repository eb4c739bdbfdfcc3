#!/usr/bin/env bash
# Issue #16's comparison on interviews=osce_res_eval (run from the repository root's parent-relative path).
# The two AMQ arms advance in steps of 4 interviews (the same ids, so pairs accumulate together); the
# single-shot arms (minutes, not hours) run at 16 once. After each run its run dir files are committed, so
# a machine reset loses at most one step. `touch $EXP/PAUSE` holds the next run until the file is removed
# (for a quiet-machine benchmark). Usage: bash drive.sh [arm:limit ...]
set -u
cd "$(dirname "$0")/../../.."
EXP=outputs/experiments/seed_b_res_eval
PY=.venv/bin/python
commit() {  # arm limit rc
  git add -f "$EXP/$1"/interviews.jsonl "$EXP/$1"/manifest.json "$EXP/$1".log "$EXP/drive.sh" 2>/dev/null
  git commit -q -m "seed B comparison (#16): $1 at limit=$2 on osce_res_eval (rc=$3; run dir files, resumable)" -- "$EXP" || true
}
run_arm() {  # arm limit
  local arm=$1 n=$2
  while [ -e "$EXP/PAUSE" ]; do sleep 10; done
  echo "=== $(date -u +%H:%M:%S) $arm limit=$n"
  $PY -m pipelines.run_interviews interviews=osce_res_eval limit="$n" eval.judge_fidelity=false \
      history_agent="$arm" agent.max_turns=8 run_dir="$PWD/$EXP/$arm" progress=false \
      >>"$EXP/$arm.log" 2>&1
  local rc=$?
  echo "=== $(date -u +%H:%M:%S) $arm limit=$n rc=$rc"
  commit "$arm" "$n" "$rc"
}
# A run started by an earlier driver is waited for, then committed.
while pgrep -f "pipelines.run_interviews interviews=osce_res_eval" >/dev/null; do sleep 15; done
[ -e "$EXP/amq/interviews.jsonl" ] && commit amq 4 0
plan=("${@:-amq_information:4 amq:8 amq_information:8 single_shot:16 single_shot_oracle:16 amq:12 amq_information:12 amq:16 amq_information:16}")
for step in ${plan[@]}; do run_arm "${step%%:*}" "${step##*:}"; done
