#!/usr/bin/env python3
"""Writes the arithmetic judge's SFT records, the input of examples/judge_arith.yaml.

A generative judge reads "{prompt}{response}|" for the arithmetic task ("23+58=" and a policy's
answer "81": "23+58=81|"), reasons by writing the true sum, then "=" and its verdict, "Y" (the
answer is the sum) or "N", then eos: {"prompt": "23+58=81|", "response": "81=Y"} (recipe sft's
sft.prompt_key / sft.response_key defaults; the RL job reads the verdict after the "=" with
reward.judge.marker). --verdict-only writes the verdict alone ("Y"), a judge that must decide
without writing the sum (it is exploited by GRPO within ~20 steps: bench/RESULTS.md).

The problems come from the built-in arithmetic task's *train* split, rebuilt with
examples/make_arith_prefs.py's task_splits (tasks/arithmetic's SplitMix64 permutation of the
90 x 90 problems, seeded with --seed = data.seed; the first --task-heldout = data.heldout_size
problems are the task's held-out split, the RL evaluation of examples/grpo_arith.yaml): no
problem of the task's held-out split is in either file. Files in OUT_DIR (default
runs/judge-arith/data):

  judge_train.jsonl  for each training problem, --per-problem correct answers ("Y") and as many
                     wrong ones ("N"), and --sums records (default 0) of the sum itself
                     ({"prompt": "23+58=", "response": "81"}: the judge learns to add, then
                     checks an answer against the sum it would write), shuffled
  judge_val.jsonl    the first --heldout problems of the task's train split (never in
                     judge_train.jsonl), one record each: "Y" for every other problem, a wrong
                     answer "N" for the rest (balanced)
  tokenizer.json     a character tokenizer ({"type": "char"}, alphabet "0123456789+=|YN", with
                     <pad> <bos> <eos>) for model.tokenizer

Wrong answers are of the kinds a policy writes: the careless teacher's dropped final carry of a
3-digit sum ("93+21=" -> "14"), the units, tens or hundreds digit off by one ("81" -> "82",
"71", "181"), other wrong numbers of 1 to 3 digits, and a few degenerate ones (no answer, a
leading zero "081", 4 digits). Held-out records draw them as a policy would (45% a digit off by
one); training records over-weight that hardest kind (--train-off-by-one 0.8): length and
leading-digit cues catch the others. Deterministic for a given --seed and --record-seed. Usage:
  python3 examples/make_arith_judge.py [--out runs/judge-arith/data] [--seed 1]
      [--task-heldout 500] [--heldout 500] [--per-problem 2] [--sums 0]
      [--train-off-by-one 0.8] [--verdict-only]
"""

import argparse
import json
import os
import random
import sys

sys.dont_write_bytecode = True  # no __pycache__ in examples/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_arith_prefs import task_splits, write_jsonl  # noqa: E402

ALPHABET = "0123456789+=|YN"

# The kinds of wrong answer and how often each is drawn (a kind that does not apply to a problem,
# the dropped carry of a 2-digit sum, draws an off-by-one digit instead).
WRONG_KINDS = [("dropped_carry", 0.20), ("off_by_one", 0.45), ("random", 0.25),
               ("degenerate", 0.10)]


def off_by_one_digit(answer):
    """Answers with the units, tens or hundreds digit off by one, e.g. 81 -> 80, 82, 71, 91, 181
    (a 2-digit sum's hundreds digit is a 0; no result starts with a 0)."""
    digits = [int(c) for c in f"{answer:03d}"]
    out = []
    for pos in range(3):
        for d in (1, -1):
            v = digits[:]
            v[pos] += d
            if not 0 <= v[pos] <= 9:
                continue
            w = int("".join(map(str, v)))
            # The hundreds digit may appear (81 -> 181) or vanish (114 -> 14); the others keep
            # the length (10 -> 0 is not a tens digit off by one).
            if pos == 0 or len(str(w)) == len(str(answer)):
                out.append(str(w))
    return out


def kind_weights(off_by_one_share):
    """WRONG_KINDS' weights with off_by_one's share set (the others scaled to the rest)."""
    rest = sum(w for k, w in WRONG_KINDS if k != "off_by_one")
    return [off_by_one_share if k == "off_by_one" else w * (1 - off_by_one_share) / rest
            for k, w in WRONG_KINDS]


def wrong_answer(a, b, rng, weights):
    """One wrong answer text for a + b, of a kind of WRONG_KINDS drawn with `weights`."""
    answer = a + b
    kind = rng.choices([k for k, _ in WRONG_KINDS], weights)[0]
    if kind == "dropped_carry" and answer >= 100:
        return f"{answer % 100:02d}"
    if kind in ("dropped_carry", "off_by_one"):
        return rng.choice(off_by_one_digit(answer))
    if kind == "random":
        while True:
            digits = rng.choice((1, 2, 3))
            w = rng.randrange(0 if digits == 1 else 10 ** (digits - 1), 10**digits)
            if w != answer:
                return str(w)
    return rng.choice(["", "0" + str(answer), str(rng.randrange(1000, 10000))])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/judge-arith/data", help="output directory")
    parser.add_argument("--seed", type=int, default=1,
                        help="the task's data.seed (chooses its splits)")
    parser.add_argument("--task-heldout", type=int, default=500,
                        help="the task's data.heldout_size: problems kept out of both files")
    parser.add_argument("--heldout", type=int, default=500,
                        help="problems of the task's train split kept for judge_val.jsonl")
    parser.add_argument("--train", type=int, default=0,
                        help="training problems to use (0 = all the others)")
    parser.add_argument("--per-problem", type=int, default=2,
                        help="correct and (as many) wrong answers a training problem")
    parser.add_argument("--sums", type=int, default=0,
                        help="also this many records a training problem that teach the sum "
                             "itself ({\"prompt\": \"23+58=\", \"response\": \"81\"}): "
                             "a judge that has learnt to add checks an answer digit by digit")
    parser.add_argument("--train-off-by-one", type=float, default=0.8,
                        help="share of the training wrong answers that are a digit off by one "
                             "(the hard ones; held-out records keep WRONG_KINDS' 0.45)")
    parser.add_argument("--verdict-only", action="store_true",
                        help="the reply is the verdict alone (\"Y\"), without the true sum "
                             "first (\"81=Y\", read with reward.judge.marker \"=\")")
    parser.add_argument("--record-seed", type=int, default=1,
                        help="seeds the wrong answers and the order of the training records")
    args = parser.parse_args()

    total = 90 * 90
    if not 0 < args.task_heldout < total:
        sys.exit(f"make_arith_judge: --task-heldout must be in [1, {total - 1}]")
    if not 0 < args.heldout < total - args.task_heldout:
        sys.exit(f"make_arith_judge: --heldout must be in [1, {total - args.task_heldout - 1}]")
    if not 0 <= args.train_off_by_one <= 1:
        sys.exit("make_arith_judge: --train-off-by-one must be in [0, 1]")
    if args.per_problem < 1 or args.train < 0 or args.sums < 0:
        sys.exit("make_arith_judge: --per-problem must be >= 1, --train and --sums >= 0")
    _, task_train = task_splits(args.seed, args.task_heldout)
    heldout, train = task_train[: args.heldout], task_train[args.heldout :]
    if args.train:
        train = train[: args.train]
    rng = random.Random(args.record_seed)
    train_weights = kind_weights(args.train_off_by_one)
    val_weights = [w for _, w in WRONG_KINDS]

    def record(a, b, answer, verdict):
        reply = verdict if args.verdict_only else f"{a + b}={verdict}"
        return {"prompt": f"{a}+{b}={answer}|", "response": reply}

    # The held-out records first, so they do not depend on the training options.
    val_records = [
        record(a, b, a + b, "Y") if i % 2 == 0 else record(a, b, wrong_answer(a, b, rng, val_weights), "N")
        for i, (a, b) in enumerate(heldout)
    ]
    train_records = []
    for a, b in train:
        for _ in range(args.per_problem):
            train_records.append(record(a, b, a + b, "Y"))
            train_records.append(record(a, b, wrong_answer(a, b, rng, train_weights), "N"))
        for _ in range(args.sums):
            train_records.append({"prompt": f"{a}+{b}=", "response": str(a + b)})
    rng.shuffle(train_records)

    os.makedirs(args.out, exist_ok=True)
    write_jsonl(os.path.join(args.out, "judge_train.jsonl"), train_records)
    write_jsonl(os.path.join(args.out, "judge_val.jsonl"), val_records)
    tokenizer = os.path.join(args.out, "tokenizer.json")
    with open(tokenizer + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"type": "char", "alphabet": ALPHABET}, f)
        f.write("\n")
    os.replace(tokenizer + ".tmp", tokenizer)
    print(f"make_arith_judge: {len(train_records)} train records ({len(train)} problems), "
          f"{len(val_records)} held-out records in {args.out} (the arithmetic task's train split "
          f"for data.seed {args.seed}, data.heldout_size {args.task_heldout})")


if __name__ == "__main__":
    main()
