#!/usr/bin/env python3
"""Writes the arithmetic task as chat-message JSONL datasets, the input of examples/grpo_jsonl.yaml.

The same problems as the built-in task's defaults (two-digit addition "23+58=", 500 held out),
but as files any verl-style job can read, with answers written the way math datasets write them:
in \\boxed{}. Three files go to OUT_DIR (default runs/arith-jsonl/data):

  train.jsonl   RL prompts, verl's shape:
                {"data_source": "arith", "prompt": [{"role": "user", "content": "23+58="}],
                 "reward_model": {"style": "rule", "ground_truth": "81"},
                 "extra_info": {"split": "train", "index": 0}}
  val.jsonl     the held-out problems, same shape (never in train.jsonl or sft.jsonl)
  corpus.txt    text to train a tokenizer on (troupe tokenizer train), one word per line
  sft.jsonl     supervised warm-start records {"prompt": [...], "response": "\\boxed{81}"} from a
                careless teacher: a share (--dropped-carry-rate) of the answers that need a third
                digit lose the final carry ("93+21=" -> "\\boxed{14}"), as the built-in demo's SFT
                data do, so SFT levels off below what a verifier-rewarded RL stage can reach.

Deterministic for a given --seed. Usage:
  python3 examples/make_arith_jsonl.py [--out runs/arith-jsonl/data] [--seed 1]
"""

import argparse
import json
import os
import random
import sys


def record(a, b, answer, split, index):
    return {
        "data_source": "arith",
        "prompt": [{"role": "user", "content": f"{a}+{b}="}],
        "reward_model": {"style": "rule", "ground_truth": str(answer)},
        "extra_info": {"split": split, "index": index},
    }


def write_jsonl(path, records):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/arith-jsonl/data", help="output directory")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--heldout", type=int, default=500, help="held-out problems")
    parser.add_argument("--dropped-carry-rate", type=float, default=0.7)
    args = parser.parse_args()
    if not 0 <= args.dropped_carry_rate <= 1:
        sys.exit("make_arith_jsonl: --dropped-carry-rate must be in [0, 1]")

    problems = [(a, b) for a in range(10, 100) for b in range(10, 100)]
    if not 0 < args.heldout < len(problems):
        sys.exit(f"make_arith_jsonl: --heldout must be in [1, {len(problems) - 1}]")
    rng = random.Random(args.seed)
    rng.shuffle(problems)
    heldout, train = problems[: args.heldout], problems[args.heldout :]

    sft = []
    for i, (a, b) in enumerate(train):
        answer = a + b
        if answer >= 100 and rng.random() < args.dropped_carry_rate:
            answer = f"{answer % 100:02d}"  # the careless teacher drops the final carry
        sft.append(
            {
                "prompt": [{"role": "user", "content": f"{a}+{b}="}],
                "response": f"\\boxed{{{answer}}}",
                "extra_info": {"index": i},
            }
        )

    os.makedirs(args.out, exist_ok=True)
    write_jsonl(os.path.join(args.out, "train.jsonl"),
                (record(a, b, a + b, "train", i) for i, (a, b) in enumerate(train)))
    write_jsonl(os.path.join(args.out, "val.jsonl"),
                (record(a, b, a + b, "val", i) for i, (a, b) in enumerate(heldout)))
    write_jsonl(os.path.join(args.out, "sft.jsonl"), sft)
    # Tokenizer training text (`troupe tokenizer train --vocab-size N --out DIR corpus.txt`): the
    # words a ChatML conversation of these records is made of, one document per line.
    corpus = os.path.join(args.out, "corpus.txt")
    with open(corpus + ".tmp", "w", encoding="utf-8") as f:
        for r in sft:
            f.write(f"user\n{r['prompt'][0]['content']}\nassistant\n{r['response']}\n")
    os.replace(corpus + ".tmp", corpus)
    print(f"make_arith_jsonl: {len(train)} train, {len(heldout)} held-out, {len(sft)} sft records "
          f"in {args.out}")


if __name__ == "__main__":
    main()
