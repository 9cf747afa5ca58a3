#!/usr/bin/env python3
"""Regenerates units.json: small templates, one construct or error each, with jinja2's answers
(configured as Hugging Face, see oracle.py). test_jinja_units.cpp checks edgelm against it.
Usage: python3 make_units.py units.json"""
import json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle
env = oracle.environment()
ctx = {"msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
       "d": {"b": 2, "a": 1}, "s": "Hello World", "n": 7, "f": 2.5, "none": None, "u8": "héllo"}
S = r'''
{{ 'a' ~ 1 ~ none }}
{{ 1 + 2 * 3 - 4 / 2 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 2 ** 3 ** 2 }}|{{ 10 / 4 }}
{{ 1 == 1.0 }}|{{ 'a' != 'b' }}|{{ 2 < 3 <= 3 }}|{{ [1,2] < [1,3] }}|{{ true == 1 }}
{{ 'a' in 'cat' }}|{{ 2 in [1,2] }}|{{ 'b' in d }}|{{ 'z' not in d }}|{{ 'x' in undefined_thing }}
{{ not none }}|{{ none or 'x' }}|{{ 0 and 1 }}|{{ 'y' if n > 5 else 'n' }}|{{ 'y' if false }}|
{{ s[0] }}{{ s[-1] }}|{{ s[1:4] }}|{{ s[::-1] }}|{{ s[::2] }}|{{ msgs[-1].content }}|{{ msgs[1:][0]['role'] }}|{{ u8[1:3] }}|{{ u8|length }}
{{ [1, 'a', none, true, 2.0, {'k': [1]}] }}|{{ {'a': 'it\'s'} }}|{{ 1e20 }}|{{ 0.00001 }}|{{ 1.5e3 }}|{{ 1_000 }}
{{ "a\tb\n\u00e9\x41\\z" }}|{{ 'x' 'y' }}
{% if n == 1 %}one{% elif n == 7 %}seven{% else %}other{% endif %}
{% for m in msgs %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}{{ m.role }};{% endfor %}
{% for m in msgs %}{{ loop.previtem.role if loop.previtem is defined else '-' }}>{{ loop.nextitem.role if loop.nextitem is defined else '-' }} {{ loop.cycle('a','b') }};{% endfor %}
{% for x in [] %}x{% else %}empty{% endfor %}|{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}|{% for k in d %}{{ k }}{% endfor %}
{% for x in range(10) if x is odd %}{{ x }}{% if x > 5 %}{% break %}{% endif %}{% endfor %}|{% for x in range(5) %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}
{% for m in msgs|reverse %}{{ m.content }}{% endfor %}|{% for c in 'ab' %}{{ c }}.{% endfor %}|{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}
{% set x = 1 %}{% for i in [1,2] %}{% set x = i %}{% endfor %}{{ x }}|{% set ns = namespace(c=0, l=[]) %}{% for i in [1,2,3] %}{% set ns.c = ns.c + i %}{% endfor %}{{ ns.c }}
{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set blk %}  in block {{ n }}  {% endset %}[{{ blk }}]|{% set t | upper %}up{% endset %}{{ t }}
{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Bob') }} {{ greet('Al', punct='?') }} {{ greet(name='Cy') }}
{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}inside{% endcall %}|{% macro rep(x) %}{{ caller(x) }}{% endmacro %}{% call(v) rep(3) %}v={{ v }}{% endcall %}
{% filter upper %}shout {{ s }}{% endfilter %}|{% raw %}{{ not parsed }}{% endraw %}|{# a comment #}after
{{ '  pad  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ s|upper }}|{{ s|lower }}|{{ 'hELLO wORLD'|capitalize }}|{{ 'hello big-world(x)'|title }}|{{ s|replace('o', '0') }}|{{ s|replace('o', '0', 1) }}
{{ [1,2,3]|join(', ') }}|{{ msgs|map(attribute='role')|join('/') }}|{{ msgs|join(',', attribute='content') }}|{{ undefined_v|default('dflt') }}|{{ ''|default('e', true) }}|{{ none|d('n') }}
{{ [3,1,2]|first }}{{ [3,1,2]|last }}|{{ 'abc'|list }}|{{ d|items|list|length }}|{{ 42|string ~ '!' }}|{{ '12'|int + 1 }}|{{ '3.7'|int }}|{{ 'x'|int(5) }}|{{ '2.5'|float }}|{{ 3|float }}
{{ 2.567|round(2) }}|{{ 2.5|round }}|{{ 3.14159|round(1, 'floor') }}|{{ -3|abs }}|{{ [1,2,3]|length }}|{{ d|count }}|{{ [1,2,1,'A','a']|unique|list }}|{{ [3,1,2]|sort }}|{{ ['b','A','c']|sort(reverse=true) }}
{{ msgs|sort(attribute='role')|map(attribute='content')|list }}|{{ "a\nb\n\nc"|indent(2) }}|{{ "a\nb"|indent(2, true) }}|{{ 'x'|safe }}|{{ '<a href="x">&</a>'|e }}|{{ [1,2,3,4,5]|batch(2)|list }}|{{ 'one two, three'|wordcount }}
{{ [1,2,3,4]|select('even')|list }}|{{ [1,2,3,4]|reject('odd')|list }}|{{ msgs|selectattr('role', 'equalto', 'user')|list|length }}|{{ msgs|rejectattr('role', 'eq', 'user')|map(attribute='content')|first }}|{{ [none, 1, 0]|select|list }}|{{ [1, 2]|map('string')|join }}
{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ {'e': 'é"\n', 'l': [1, 2.0, none, true], 'o': {}}|tojson }}|{{ [1, [2]]|tojson(2) }}|{{ d|tojson(sort_keys=true) }}|{{ d|dictsort|length }}|{{ [1,2,3]|sum }}|{{ [4,2,9]|max }}{{ [4,2,9]|min }}
{{ x is defined }}{{ x is undefined }}{{ none is none }}{{ 's' is string }}{{ 1 is number }}{{ 1.0 is integer }}{{ 1 is integer }}{{ true is boolean }}{{ d is mapping }}{{ 's' is iterable }}{{ msgs is sequence }}{{ d is sequence }}
{{ 4 is even }}{{ 3 is odd }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(2) }}{{ 'a' is equalto 'a' }}{{ 1 is eq 1 }}{{ 2 is in [1,2] }}{{ true is true }}{{ 0 is false }}{{ x is not defined }}{{ none is not none }}{{ 1 is gt 0 }}
{{ s.startswith('He') }}{{ s.endswith(('x', 'ld')) }}|{{ '  a  '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'xxaxx'.rstrip('x') }}|{{ 'a b  c'.split() }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ s.upper() }}{{ s.lower() }}
{{ "they're bill's".title() }}|{{ 'abc'.capitalize() }}|{{ s.replace('l', 'L') }}|{{ s.find('o') }}{{ s.find('z') }}|{{ s.count('l') }}|{{ '{} and {}'.format(1, 'b') }}|{{ '{x}!'.format(x=3) }}|{{ '-'.join(['a', 'b']) }}|{{ "l1\nl2".splitlines() }}
{{ d.get('a') }}{{ d.get('z') }}{{ d.get('z', 0) }}|{{ d.keys()|list }}|{{ d.values()|list }}|{{ d.items()|list|length }}|{{ dict(a=1, b='x') }}|{{ range(3)|list }}{{ range(1, 7, 2)|list }}|{{ namespace(a=1).a }}
{{ bos }}{{ missing }}[{{ missing|length }}]{{ missing|list }}{{ missing|upper }}
{{ strftime_now('%Y-%m-%d %A %b') }}
{{ '%s and %d'|format('a', 3) }}|{{ 'x%sy' % 'Z' }}|{{ '-' * 3 }}|{{ [1] * 2 }}|{{ [1] + [2] }}|{{ 'a' + 'b' }}
  {% if true %}
    lstrip and trim
  {% endif %}
{%- if true -%}  dash  {%- endif -%}
{{- '  var dash  ' -}}
a  {%+ if true %}keep lstrip{% endif +%}
b
{% generation %}gen body{% endgeneration %}
{{ d.items()|map('last')|join }}
'''
ERR = r'''
{{ raise_exception('custom failure') }}
{{ x.y }}
{{ d.z.w }}
{{ 1 + 'a' }}
{{ none + 'a' }}
{{ 1 / 0 }}
{{ 'a' in none }}
{% for x in none %}{% endfor %}
{{ x|nosuchfilter }}
{{ x is nosuchtest }}
{{ msgs[5].role }}
{{ d|tojson(indent=x.y) }}
{{ undefined_fn() }}
{% set l = [1] %}{{ l.append(2) }}
{% if x %}
{% for x in y %}{% endif %}
{{ 1 +
{{ 'unterminated }}
{% unknowntag %}
{{ ) }}
{% endif %}
{# no end
{{ [1, 2 }}
{{ a b }}
{% macro m( %}{% endmacro %}
'''
out = []
# Each line of S is one case, except the multi-line whitespace block at the end which we keep as one.
lines = S.strip('\n').split('\n')
ws_start = next(i for i, l in enumerate(lines) if l.startswith('  {% if true %}'))
ws_end = next(i for i, l in enumerate(lines) if l.startswith('{% generation'))
cases = lines[:ws_start] + ['\n'.join(lines[ws_start:ws_end + 1]) + '\n'] + lines[ws_end + 1:]
for c in cases:
    try:
        out.append((c, 'ok', env.from_string(c).render(**ctx)))
    except oracle.Raised as e:
        out.append((c, 'raise', str(e)))
    except Exception as e:
        out.append((c, 'error', type(e).__name__ + ': ' + str(e)))
for c in [l for l in ERR.strip('\n').split('\n')]:
    try:
        out.append((c, 'ok', env.from_string(c).render(**ctx)))
    except oracle.Raised as e:
        out.append((c, 'raise', str(e)))
    except Exception as e:
        out.append((c, 'error', type(e).__name__ + ': ' + str(e)))
json.dump({"context": ctx, "cases": [{"template": c, "kind": k, "expected": e} for c, k, e in out]}, open(sys.argv[1], 'w'), ensure_ascii=False, indent=1)
