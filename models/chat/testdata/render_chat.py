#!/usr/bin/env python3
"""Reference renderer for models/chat: renders chat templates with Python's Jinja2 the way
transformers' apply_chat_template does (ImmutableSandboxedEnvironment with trim_blocks and
lstrip_blocks, loopcontrols, tojson as transformers defines it, raise_exception, strftime_now).

Usage:
  render_chat.py CASES.json        renders every case, prints a JSON list of results to stdout
  render_chat.py --bench N CASE.json
                                   renders one case N times, prints {"renders_per_s": ...,
                                   "cpu_renders_per_s": ...} (timed inside Python, start-up
                                   and template compilation excluded)

A case: {"template": PATH, "messages": [...], "tools": [...] | null, "add_generation_prompt": bool,
         "special_tokens": {"bos_token": ...}, "extra": {...}, "now": "YYYY-MM-DDTHH:MM:SS"}
A result: {"ok": true, "text": ...} or {"ok": false, "error": message}.
"""
import datetime
import json
import sys
import time

try:
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    sys.stderr.write("python3-jinja2 is missing: run tools/install_deps.sh\n")
    sys.exit(3)


def make_env(now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return now.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


_templates = {}


def compile_case(case):
    now = datetime.datetime.fromisoformat(case.get("now", "2024-07-26T12:00:00"))
    key = (case["template"], now)
    if key not in _templates:
        with open(case["template"], encoding="utf-8") as f:
            _templates[key] = make_env(now).from_string(f.read())
    kwargs = dict(case.get("special_tokens") or {})
    kwargs.update(case.get("extra") or {})
    return _templates[key], dict(messages=case["messages"], tools=case.get("tools"),
                                 documents=None,
                                 add_generation_prompt=case.get("add_generation_prompt", False),
                                 **kwargs)


def render(case):
    try:
        template, variables = compile_case(case)
        return {"ok": True, "text": template.render(**variables)}
    except Exception as e:  # the test compares error messages
        return {"ok": False, "error": str(e)}


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--bench":
        n = int(sys.argv[2])
        with open(sys.argv[3], encoding="utf-8") as f:
            case = json.load(f)
        template, variables = compile_case(case)
        template.render(**variables)  # warm-up
        start, cpu_start = time.perf_counter(), time.process_time()
        for _ in range(n):
            template.render(**variables)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        print(json.dumps({"renders_per_s": n / elapsed, "cpu_renders_per_s": n / cpu,
                          "seconds": elapsed}))
        return
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__)
        sys.exit(2)
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    json.dump([render(c) for c in cases], sys.stdout)


if __name__ == "__main__":
    main()
