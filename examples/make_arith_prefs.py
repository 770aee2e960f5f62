#!/usr/bin/env python3
"""Writes preference pairs over two-digit additions, the input of examples/rm_arith.yaml.

A reward model learns to tell a correct sum from the careless teacher's mistakes
(tasks/arithmetic): the chosen response is the true sum, the rejected one a plausible wrong
answer — the dropped final carry when the sum has three digits ("93+21=" -> "14" instead of
"114"), else a units or tens digit off by one ("23+58=" -> "82", "80", "91" or "71").

The problems come from the built-in arithmetic task's *train* split (data.task: arithmetic, the
split examples/grpo_arith.yaml's RL prompts and SFT data come from), rebuilt here exactly as
tasks/arithmetic/arithmetic_task.cc does (a SplitMix64-driven Fisher-Yates permutation of the
90 x 90 problems, seeded with --seed = data.seed; the first --task-heldout = data.heldout_size
problems are the task's held-out split). No problem of the task's held-out split (the RL
evaluation) is in either file. Files in OUT_DIR (default runs/rm-arith/data):

  prefs_train.jsonl  {"prompt": "23+58=", "chosen": "81", "rejected": "71"}: for each training
                     problem, its wrong answers (--rejected all: every distinct wrong answer of
                     both kinds below; sample: --pairs-per-problem draws of the teacher's mistake)
  prefs_val.jsonl    one pair (the teacher's mistake) for each of the --heldout problems: the
                     first --heldout problems of the task's train split, never in
                     prefs_train.jsonl
  tokenizer.json     a character tokenizer ({"type": "char", alphabet "0123456789+="}, with
                     <pad> <bos> <eos>) for model.tokenizer

The wrong answers of --rejected all: the teacher's mistake (the dropped carry of a 3-digit sum,
else the off-by-one digits) plus every other units or tens digit off by one that keeps the answer's
length ("114" -> "113", "115", "104", "124"). Held-out pairs are always the teacher's mistake, one
a problem, so the figure is comparable whatever the training distribution. Deterministic for a
given --seed and --pair-seed. Usage:
  python3 examples/make_arith_prefs.py [--out runs/rm-arith/data] [--seed 1] [--task-heldout 500]
"""

import argparse
import json
import os
import random
import sys

MASK64 = (1 << 64) - 1
SPLITMIX64_INCREMENT = 0x9E3779B97F4A7C15


def splitmix64(x):
    """base/splitmix64.h's SplitMix64."""
    x = (x + SPLITMIX64_INCREMENT) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def task_order(seed, total):
    """The arithmetic task's permutation of problem indices (ArithmeticTask::Create)."""
    order = list(range(total))
    state = seed & MASK64
    for i in range(total - 1, 0, -1):
        out = splitmix64(state)
        state = (state + SPLITMIX64_INCREMENT) & MASK64
        j = (out * (i + 1)) >> 64
        order[i], order[j] = order[j], order[i]
    return order


def task_splits(seed, num_heldout, digits=2):
    """(held-out, train) problems (a, b) of the arithmetic task with num_train 0, in its order."""
    high = 10**digits
    low = 0 if digits == 1 else high // 10
    span = high - low
    problems = [(low + i // span, low + i % span) for i in task_order(seed, span * span)]
    return problems[:num_heldout], problems[num_heldout:]


def teacher_mistake(a, b, rng):
    """The careless teacher's wrong sum: the dropped carry of a 3-digit sum, else a digit off by 1."""
    answer = a + b
    if answer >= 100:
        return f"{answer % 100:02d}"
    return str(rng.choice(off_by_one(answer)))


def off_by_one(answer):
    """The answers with the units or tens digit off by one, of the same length as `answer`."""
    low = 100 if answer >= 100 else 10
    high = 1000 if answer >= 100 else 100
    return [answer + d for d in (1, -1, 10, -10) if low <= answer + d < high]


def write_jsonl(path, records):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/rm-arith/data", help="output directory")
    parser.add_argument("--seed", type=int, default=1,
                        help="the task's data.seed (chooses its splits)")
    parser.add_argument("--task-heldout", type=int, default=500,
                        help="the task's data.heldout_size: problems kept out of both files")
    parser.add_argument("--heldout", type=int, default=500,
                        help="problems of the task's train split kept for prefs_val.jsonl")
    parser.add_argument("--train", type=int, default=0,
                        help="training problems to use (0 = all the others)")
    parser.add_argument("--rejected", choices=["all", "sample"], default="all",
                        help="training pairs: every wrong answer, or sampled teacher's mistakes")
    parser.add_argument("--pairs-per-problem", type=int, default=4,
                        help="with --rejected sample: draws a problem (duplicates dropped)")
    parser.add_argument("--pair-seed", type=int, default=1,
                        help="seeds the wrong-answer draws and the order of the training pairs")
    args = parser.parse_args()

    total = 90 * 90
    if not 0 < args.task_heldout < total:
        sys.exit(f"make_arith_prefs: --task-heldout must be in [1, {total - 1}]")
    if not 0 < args.heldout < total - args.task_heldout:
        sys.exit(f"make_arith_prefs: --heldout must be in [1, {total - args.task_heldout - 1}]")
    if args.pairs_per_problem < 1 or args.train < 0:
        sys.exit("make_arith_prefs: --pairs-per-problem must be >= 1 and --train >= 0")
    _, task_train = task_splits(args.seed, args.task_heldout)
    heldout, train = task_train[: args.heldout], task_train[args.heldout :]
    if args.train:
        train = train[: args.train]
    rng = random.Random(args.pair_seed)

    def record(a, b, rejected):
        return {"prompt": f"{a}+{b}=", "chosen": str(a + b), "rejected": rejected}

    train_records = []
    for a, b in train:
        if args.rejected == "all":
            wrong = [str(w) for w in off_by_one(a + b)]
            if a + b >= 100:
                wrong.append(teacher_mistake(a, b, rng))
        else:
            wrong = []
            for _ in range(args.pairs_per_problem):
                w = teacher_mistake(a, b, rng)
                if w not in wrong:  # a 3-digit sum has one mistake of this kind
                    wrong.append(w)
        train_records += [record(a, b, w) for w in wrong]
    rng.shuffle(train_records)
    val_records = [record(a, b, teacher_mistake(a, b, rng)) for a, b in heldout]

    os.makedirs(args.out, exist_ok=True)
    write_jsonl(os.path.join(args.out, "prefs_train.jsonl"), train_records)
    write_jsonl(os.path.join(args.out, "prefs_val.jsonl"), val_records)
    tokenizer = os.path.join(args.out, "tokenizer.json")
    with open(tokenizer + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"type": "char", "alphabet": "0123456789+="}, f)
        f.write("\n")
    os.replace(tokenizer + ".tmp", tokenizer)
    print(f"make_arith_prefs: {len(train_records)} train pairs ({len(train)} problems), "
          f"{len(val_records)} held-out pairs in {args.out} (the arithmetic task's train split "
          f"for data.seed {args.seed}, data.heldout_size {args.task_heldout})")


if __name__ == "__main__":
    main()
