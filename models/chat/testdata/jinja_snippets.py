#!/usr/bin/env python3
"""Generates jinja_snippets.json, the golden file of models/chat/jinja_test: small templates, each
rendered by Python's Jinja2 in the environment of render_chat.py (transformers' settings).
Run from this directory after editing the list: /usr/bin/python3 jinja_snippets.py
"""
import datetime
import json
import os

import render_chat

env = render_chat.make_env(datetime.datetime(2025, 2, 3, 14, 5, 6))
# Every character Python's str.isspace() accepts.
WS = "".join(chr(c) for c in range(0x110000) if chr(c).isspace())
S = [
 ("text only", "{}"),
 ("{{ x }}|{{ y }}|{{ z }}|{{ none }}|{{ true }}|{{ f }}", '{"x": 1, "y": "s", "z": null, "f": 2.5}'),
 ("{{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 4 / 2 }} {{ 1e-5 }} {{ 1.5e16 }} {{ 0.1 + 0.2 }}", "{}"),
 ("{{ 'a' ~ 1 ~ none ~ undefined_var }}|{{ 'ab' * 3 }}|{{ [1] + [2, 'x'] }}", "{}"),
 ("{{ [1, 'a', none, true, 2.0, {'k': 'v\"'}] }}|{{ {'a': [1]} }}|{{ \"it's\" }}|{{ ['it\\'s'] }}", "{}"),
 ("{% if a %}A{% elif b %}B{% else %}C{% endif %}", '{"b": 1}'),
 ("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}", '{"xs": ["a","b","c"]}'),
 ("{% for x in xs if x > 1 %}{{ x }}/{{ loop.length }} {% else %}empty{% endfor %}", '{"xs": [1,2,3]}'),
 ("{% for x in xs %}{{ x }}{% else %}empty{% endfor %}", '{"xs": []}'),
 ("{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}", '{"d": {"b": 1, "a": 2}}'),
 ("{% for k, v in d | items %}{{ k }}={{ v }},{% endfor %}{% for k in d %}{{ k }}{% endfor %}", '{"d": {"b": 1, "a": 2}}'),
 ("{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", '{"xs": [1,2,3,4,5]}'),
 ("{% set ns = namespace(n=0, s='') %}{% for x in xs %}{% set ns.n = ns.n + x %}{% set ns.s = ns.s ~ x %}{% endfor %}{{ ns.n }} {{ ns.s }}", '{"xs": [1,2,3]}'),
 ("{% set x = 1 %}{% for i in [1,2] %}{% set x = i %}{% endfor %}{{ x }}", "{}"),
 ("{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t | length }}", "{}"),
 ("{% set block %}  inner {{ 1 }}\n{% endset %}[{{ block }}]", "{}"),
 ("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Bob') }} {{ greet('Al', punct='?') }} {{ greet(name='Z') }}", "{}"),
 ("  {% if true %}\n    x\n  {% endif %}\n  y\n", "{}"),
 ("a  {%- if true -%}  b  {%- endif -%}  c\n{{- ' d ' -}}\n e {#- comment -#} f", "{}"),
 ("{% for x in [1,2] %}\n  {{ x }}\n{% endfor %}\n", "{}"),
 ("line1\n  {# comment #}\nline2\n    {%+ if true %}kept{% endif %}\n", "{}"),
 ("{{ s[::-1] }}|{{ s[1:3] }}|{{ s[-2:] }}|{{ xs[::2] }}|{{ xs[-1] }}|{{ xs[1:] }}|{{ s[0] }}", '{"s": "héllo", "xs": [1,2,3,4,5]}'),
 ("{{ x is defined }}{{ y is defined }}{{ y is undefined }}{{ z is none }}{{ x is string }}{{ d is mapping }}{{ xs is iterable }}{{ x is iterable }}{{ xs is sequence }}{{ 1 is number }}{{ true is boolean }}{{ true is true }}{{ false is false }}{{ 1 is true }}{{ d is not mapping }}", '{"x": "s", "z": null, "d": {}, "xs": [1]}'),
 ("{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 'a' is in 'cat' }}{{ 2 is eq 2 }}{{ 1.5 is float }}{{ 2 is integer }}{{ 'x' is lower }}", "{}"),
 ("{{ '  pad  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ 'hello world-foo' | title }}|{{ 'hELLO' | capitalize }}|{{ 'a' | upper }}{{ 'B' | lower }}|{{ 5 | string }}|{{ '42' | int + 1 }}|{{ '3.7' | int }}|{{ 'x' | int }}|{{ '2.5' | float }}|{{ 3 | float }}", "{}"),
 ("{{ xs | length }} {{ s | length }} {{ d | length }} {{ xs | count }} {{ xs | first }} {{ xs | last }} {{ s | first }} {{ xs | join(', ') }} {{ s | list }} {{ xs | reverse | list }}", '{"xs": [3,1,2], "s": "héllo", "d": {"a": 1}}'),
 ("{{ u | default('dflt') }}|{{ '' | default('e', true) }}|{{ none | d('n') }}|{{ 'abcabc' | replace('b', 'X') }}|{{ 'abcabc' | replace('b', 'X', 1) }}", "{}"),
 ("{{ users | map(attribute='name') | join('/') }}|{{ users | selectattr('admin') | map(attribute='name') | list }}|{{ users | rejectattr('admin') | list | length }}|{{ users | selectattr('name', 'equalto', 'b') | list }}", '{"users": [{"name": "a", "admin": true}, {"name": "b", "admin": false}]}'),
 ("{{ ['1', '22'] | map('int') | list }}|{{ [1, 0, 2] | select | list }}|{{ [1, 2, 3, 4] | reject('odd') | list }}|{{ [3, 1, 2] | sort | list }}|{{ [1, 2, 1] | unique | list }}|{{ [1, 5, 3] | max }}|{{ [1, 5, 3] | min }}|{{ [1, 2.5] | sum }}", "{}"),
 ("{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ s | tojson }}|{{ [] | tojson(indent=2) }}|{{ d | tojson(sort_keys=true) }}|{{ d | tojson(separators=(',', ':')) }}|{{ 'é' | tojson(ensure_ascii=true) }}", '{"d": {"z": [1, 2.0, null, true, "é\\n\\"\\u0001"], "a": {}}, "s": "tab\\there"}'),
 ("{{ text | indent(2) }}|{{ text | indent(2, true) }}|{{ text | indent(2, first=true, blank=true) }}", '{"text": "a\\n\\nb\\n"}'),
 ("{{ ' a b  c ' .split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a,b,c'.split(',', 1) }}|{{ '  x '.strip() }}|{{ 'xxa'.lstrip('x') }}|{{ 'axx'.rstrip('x') }}|{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}|{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}|{{ 'hello wORLD'.title() }}|{{ 'a-b'.replace('-', '+') }}|{{ '{} and {x}'.format(1, x=2) }}", "{}"),
 ("{{ d.keys() | list }}|{{ d.values() | list }}|{{ d.get('a') }}|{{ d.get('zz', 'no') }}|{{ d.get('zz') }}|{{ d['a'] }}|{{ d.a }}|{{ d.missing }}|{{ d.items() | list }}", '{"d": {"a": 1, "b": [2]}}'),
 ("{{ 1 if x else 2 }}|{{ 'yes' if y }}|{{ x and y }}|{{ x or y }}|{{ not x }}|{{ 1 < 2 < 3 }}|{{ 3 > 2 >= 2 }}|{{ 'a' in 'cat' }}|{{ 1 not in [1, 2] }}|{{ 'k' in d }}|{{ 1 == 1.0 }}|{{ 'a' != 'b' }}|{{ -x }}|{{ [1, 2] == [1, 2] }}", '{"x": 5, "y": 0, "d": {"k": 1}}'),
 ("{{ range(3) | list }}|{{ range(1, 10, 3) | list }}|{{ range(5, 0, -2) | list }}|{{ strftime_now('%Y-%m-%d %H:%M %B %b %d') }}", "{}"),
 ("{% for x in xs %}{{ loop.cycle('odd', 'even') }}{{ loop.previtem }}-{% endfor %}", '{"xs": [1,2,3]}'),
 ("{{ \"a\" \"b\" }}|{{ 'x\\ny\\t\\u00e9' }}|{{ 1_000 }}|{{ (1 + 2) * 3 }}|{{ -2 ** 2 }}|{{ 10 - 2 - 3 }}|{{ 2 * 3 + 1 }}|{{ 'a' ~ (1 + 2) }}", "{}"),
 ("{{ 'a' ~ 1 + 2 }}", "{}"),
 ("{{ xs[5] }}|{{ d.x is defined }}|{{ (d.x or 'alt') }}|{{ xs | selectattr('k', 'defined') | list }}", '{"xs": [{"k": 1}, {}], "d": {}}'),
 ("{%- for m in messages -%}\n{%- if m.role == 'user' -%}\n<u>{{ m.content }}</u>\n{%- else -%}\n<a>{{ m.content }}</a>\n{%- endif -%}\n{%- endfor -%}", '{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}'),
 ("{% for i in [1, 2] %}{% if i == 2 %}[{{ x }}]{% endif %}{% set x = i %}{% endfor %}[{{ x }}]", "{}"),
 ("{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ b }}{% endfor %}{{ loop.index }}{% endfor %}", "{}"),
 ("{% macro m() %}{{ v }}{% endmacro %}{% set v = 3 %}{{ m() }}", '{"v": 1}'),
 ("{% set x = 5 %}{% macro m(x) %}{{ x }}{% endmacro %}{{ m() }}|{{ m(1) }}|{{ x }}", "{}"),
 ("{{ (1, 2) }}{{ (1,) }}{{ () }}{% set t = 1, 'a' %}{{ t }}{{ t[1] }}", "{}"),
 ("{% if messages[0]['role'] == 'system' %}{% set messages = messages[1:] %}{% endif %}{{ messages | length }}", '{"messages": [{"role": "system"}, {"role": "user"}]}'),
 ("{{ m.content is string }}{{ m.content is none }}{{ m.tool_calls is defined }}{{ m['tool_calls'] }}", '{"m": {"content": null}}'),
 ("{{ messages | selectattr('role', 'eq', 'user') | list | length }}{{ messages | map(attribute='role') | join }}", '{"messages": [{"role": "system"}, {"role": "user"}, {"role": "user"}]}'),
 ("{{ x | tojson }}{{ y | tojson }}{{ z | tojson }}{{ [1.5, -0.0, 1e100, 3] | tojson }}", '{"x": "\\u2028 \\u007f \\ud83d\\ude00 \\u00e9", "y": {"a": null}, "z": true}'),
 ("{{ 'abc'[5:] }}|{{ 'abc'[-10:2] }}|{{ [1,2,3][::-2] }}|{{ 'héllo'[1] }}|{{ 'abc'[1:0] }}|{{ [1,2,3][-1:-3:-1] }}", "{}"),
 ("{{ '%s' }}{{ 10 // 3 * 3 }}{{ 2 ** 3 ** 2 }}{{ not 1 == 2 }}{{ -3 | abs }}{{ 3.7 | round }}{{ 2.5 | round }}{{ 3.14159 | round(2) }}", "{}"),
 ("{{ 'a\\nb\\r\\nc' .splitlines() }}{{ 'x'.join(['1', '2']) }}{{ 'aaa'.count('a') }}{{ 'abc'.find('c') }}", "{}"),
 ("{%- set ns = namespace(items=[]) -%}{%- for x in [1, 2] -%}{%- set ns.items = ns.items + [x * 2] -%}{%- endfor -%}{{ ns.items }}", "{}"),
 ("{{ d | items | list }}{% for k, v in d | dictsort %}{{ k }}{% endfor %}{{ d.items() | length }}", '{"d": {"b": 1, "a": 2}}'),
 ("{{ none | string }}{{ [] | string }}{{ {} | tojson }}{{ '' | default('x') }}{{ 0 | default(5, true) }}", "{}"),
 ("{% set x = 0 %}{% for i in [1, 2] %}[{{ x }}]{% set x = i %}{% endfor %}[{{ x }}]", "{}"),
 ("{{ 1 if false }}|{{ (1 if false) is defined }}", "{}"),
 ("{{ loop }}", "{}"),
 ("{% set x = {'a': 1} %}{{ x.a }}{{ x['a'] }}{{ x.get('a') }}{{ 'a' in x }}", "{}"),
 ("{{ 'A' < 'a' }}{{ [1, 2] < [1, 3] }}{{ 1 < 2.5 }}{{ true + 1 }}", "{}"),
 ("{{ messages[-1].content | trim }}{{ messages[0]['content'].strip() }}", '{"messages": [{"content": "  a  "}, {"content": " b "}]}'),
 ("{{ d.x.y }}", '{"d": {}}'),
 ("{{ u.attr }}", "{}"),
 ("{{ xs | bogus }}", "{}"),
 ("{{ 1 is bogus }}", "{}"),
 ("{{ 1 < 'a' }}", "{}"),
 ("{{ raise_exception('custom failure') }}", "{}"),
 ("{{ 'Hello'|length }}{{ '%' }}{{ {'a': 1}.a }}{{ [[1, 2]][0][1] }}{{ xs.0 }}", '{"xs": [9]}'),
 ("{{ 1.0 }} {{ 100.0 }} {{ 1e20 }} {{ 123456789.123 }} {{ 1/3 }} {{ -0.0 }} {{ 2.5e-7 }}", "{}"),
 ("{% if xs %}{{ xs | length }}{% endif %}{{ xs | dictsort }}", '{"xs": {"b": 1, "A": 2, "c": 0}}'),
 # Python's whitespace (str.isspace), not only ASCII's: every such character, and ones that are
 # not (U+200B, U+180E, U+FEFF, U+00AD) and must stay.
 ("[{{ s | trim }}]|[{{ s.strip() }}]|[{{ s.lstrip() }}]|[{{ s.rstrip() }}]|{{ s.split() | join('|') }}|{{ s.split(none, 1) | join('|') }}|{{ s.split(maxsplit=2) | join('|') }}|{{ s.split() | length }}", json.dumps({"s": WS + "h\u00e9llo" + WS + "w\u00f6rld\u200bx\u180ey\ufeffz\u00ad" + WS})),
 ("{% for c in ws %}[{{ c | trim }}{{ (c ~ 'a' ~ c).strip() }}{{ ('a' ~ c).rstrip() }}{{ (c ~ 'a').lstrip() }}{{ ('a' ~ c ~ 'b').split() | length }}]{% endfor %}", json.dumps({"ws": list(WS) + ["\u200b", "\u180e", "\ufeff", "\u00ad", "\u0080", "\u2060"]})),
 ("{{ 'hello\u00a0world\u3000foo\u2028bar\u200bbaz' | title }}|{{ ' a\u2003b '.title() }}|{{ '\u00a042\u3000' | int }}|{{ '\u2003 2.5\u00a0' | float }}", "{}"),
 ("{{ '\u00e8\u00e9a\u00e9'.lstrip('\u00e8') }}|{{ 'x\u00e9'.rstrip('\u00e8') }}|{{ '\u00e9\u00e8x\u00e8\u00e9'.strip('\u00e9\u00e8') }}|{{ '\u4e16\u754cx\u754c'.strip('\u754c') }}|{{ 'ab'.strip('') }}", "{}"),
 ("{{ s.splitlines() | join('|') }}#{{ s | indent(2) }}#{{ s.splitlines() | length }}", json.dumps({"s": "a\vb\fc\x1cd\x1de\x1ef\x1fg\x85h\u2028i\u2029j\r\nk\rl\n"})),
 # repr (a list or dict printed) escapes what str.isprintable() rejects, whitespace included.
 ("{{ xs }}|{{ d }}|{{ xs | string }}|{{ (xs[0], 'x') }}", json.dumps({"xs": [WS, "a\u00ad\u200b\u2060\ufeff\U000e0001\u0378\ue000\U0010fffd\u00e9\u4e16\U0001f600 '", "\"q\" \\ \x7f\x80\x9f"], "d": {"k\u3000\u2028": "v\u00a0\x85"}})),
 ("a\u00a0\u3000 {%- if true -%}\u2003\u00a0 b {{- ' c' -}}\u3000\n d\n\u3000\u00a0{% endif %}\n\u00a0\u2003{% if true %}e{% endif %}\n{%\u00a0if\u3000true\u2003%}f{%\u00a0endif\u00a0%}|{#- c -#}\u2028\u2029x {{- 'y' }}\u0085 \n  \u200b{% if true %}z{% endif %}", "{}"),
]
out = []
for template, context in S:
    entry = {"template": template, "context": json.loads(context)}
    try:
        entry["text"] = env.from_string(template).render(**entry["context"])
    except Exception as e:
        entry["error"] = str(e)
    out.append(entry)
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jinja_snippets.json")
with open(path, "w", encoding="utf-8") as f:
    json.dump(out, f, ensure_ascii=False, indent=1)
    f.write("\n")
