#!/usr/bin/env python3
"""Writes preference pairs over two-digit additions, the input of examples/rm_arith.yaml.

A reward model learns to tell a correct sum from the careless teacher's mistakes
(examples/make_arith_jsonl.py): the chosen response is the true sum, the rejected one a plausible
wrong answer — the dropped final carry when the sum has three digits ("93+21=" -> "14" instead of
"114"), else a units or tens digit off by one ("23+58=" -> "82", "80", "91" or "71"). Files in
OUT_DIR (default runs/rm-arith/data):

  prefs_train.jsonl  {"prompt": "23+58=", "chosen": "81", "rejected": "71"}, --pairs-per-problem (4)
                     pairs (different wrong answers) for each training problem
  prefs_val.jsonl    one pair for each of the --heldout problems (never in prefs_train.jsonl)
  tokenizer.json     a character tokenizer ({"type": "char", alphabet "0123456789+="}, with
                     <pad> <bos> <eos>) for model.tokenizer

The held-out split is the one make_arith_jsonl.py makes for the same --seed (the same shuffle of
the same problems). Deterministic for a given --seed. Usage:
  python3 examples/make_arith_prefs.py [--out runs/rm-arith/data] [--seed 1]
"""

import argparse
import json
import os
import random
import sys


def wrong_answer(a, b, rng):
    """A plausible wrong sum: the dropped carry for a 3-digit sum, else a digit off by one."""
    answer = a + b
    if answer >= 100:
        return f"{answer % 100:02d}"
    candidates = [answer + d for d in (1, -1, 10, -10) if 10 <= answer + d <= 99]
    return str(rng.choice(candidates))


def write_jsonl(path, records):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/rm-arith/data", help="output directory")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--heldout", type=int, default=500, help="held-out problems")
    parser.add_argument("--train", type=int, default=0,
                        help="training problems to use (0 = all the others)")
    parser.add_argument("--pairs-per-problem", type=int, default=4)
    args = parser.parse_args()

    problems = [(a, b) for a in range(10, 100) for b in range(10, 100)]
    if not 0 < args.heldout < len(problems):
        sys.exit(f"make_arith_prefs: --heldout must be in [1, {len(problems) - 1}]")
    if args.pairs_per_problem < 1 or args.train < 0:
        sys.exit("make_arith_prefs: --pairs-per-problem must be >= 1 and --train >= 0")
    rng = random.Random(args.seed)
    rng.shuffle(problems)  # as make_arith_jsonl.py: the same held-out problems for a seed
    heldout, train = problems[: args.heldout], problems[args.heldout :]
    if args.train:
        train = train[: args.train]

    def pair(a, b):
        return {"prompt": f"{a}+{b}=", "chosen": str(a + b), "rejected": wrong_answer(a, b, rng)}

    train_records = []
    for a, b in train:
        seen = set()
        for _ in range(args.pairs_per_problem):
            r = pair(a, b)
            if r["rejected"] in seen:
                continue  # a 3-digit sum has one wrong answer of this kind
            seen.add(r["rejected"])
            train_records.append(r)
    rng.shuffle(train_records)
    val_records = [pair(a, b) for a, b in heldout]

    os.makedirs(args.out, exist_ok=True)
    write_jsonl(os.path.join(args.out, "prefs_train.jsonl"), train_records)
    write_jsonl(os.path.join(args.out, "prefs_val.jsonl"), val_records)
    tokenizer = os.path.join(args.out, "tokenizer.json")
    with open(tokenizer + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"type": "char", "alphabet": "0123456789+="}, f)
        f.write("\n")
    os.replace(tokenizer + ".tmp", tokenizer)
    print(f"make_arith_prefs: {len(train_records)} train pairs ({len(train)} problems), "
          f"{len(val_records)} held-out pairs in {args.out}")


if __name__ == "__main__":
    main()
