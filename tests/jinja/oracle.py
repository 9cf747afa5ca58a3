#!/usr/bin/env python3
"""Renders chat templates with jinja2 configured as Hugging Face transformers configures it.

The oracle for edgelm's Jinja interpreter (tests/jinja/test_jinja_oracle.cpp):
  oracle.py TEMPLATES.json CONVERSATIONS.json > RESULTS.json
TEMPLATES.json: [{"model": ..., "source": ...}]; CONVERSATIONS.json: [{"name": ..., "context": {...}}].
RESULTS.json: one entry per template: {"parse_error": msg} or {"renders": [per conversation
{"text": ...} | {"error": msg, "raised": bool}]}.
The environment follows transformers' _compile_jinja_template: ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, loopcontrols, {% generation %} as a plain block, tojson as
json.dumps(ensure_ascii=False, ...), raise_exception, strftime_now on a fixed clock
(2024-07-26 00:00:00).
"""
import datetime
import json
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Raised(jinja2.exceptions.TemplateError):
    pass


class Generation(Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise Raised(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.datetime(2024, 7, 26, 0, 0, 0).strftime(fmt)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    templates = json.load(open(sys.argv[1]))
    conversations = json.load(open(sys.argv[2]))
    env = environment()
    out = []
    for t in templates:
        try:
            compiled = env.from_string(t["source"])
        except Exception as e:  # noqa: BLE001 - any failure is the oracle's answer
            out.append({"parse_error": f"{type(e).__name__}: {e}"})
            continue
        renders = []
        for c in conversations:
            try:
                renders.append({"text": compiled.render(**c["context"])})
            except Raised as e:
                renders.append({"error": str(e), "raised": True})
            except Exception as e:  # noqa: BLE001
                renders.append({"error": f"{type(e).__name__}: {e}", "raised": False})
        out.append({"renders": renders})
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
