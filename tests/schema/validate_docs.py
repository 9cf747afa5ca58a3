#!/usr/bin/env python3
"""Independent check for the schema property test: every line of the input file is a JSON object
{"schema": ..., "doc": "<JSON text>"}; the doc must parse and validate against the schema
(draft 2020-12, formats checked). Prints the failures and exits 1 if any, 2 if jsonschema is
missing, 0 otherwise."""
import json
import sys

try:
    import jsonschema
    from jsonschema import Draft202012Validator
except ImportError:
    print("validate_docs.py: python3-jsonschema is not installed (scripts/setup.sh installs it)")
    sys.exit(2)


def main(path):
    checker = getattr(Draft202012Validator, "FORMAT_CHECKER", None) or jsonschema.FormatChecker()
    validators = {}
    n_docs = n_fail = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            key = json.dumps(rec["schema"], sort_keys=True)
            if key not in validators:
                validators[key] = Draft202012Validator(rec["schema"], format_checker=checker)
            n_docs += 1
            try:
                doc = json.loads(rec["doc"])
            except ValueError as e:
                n_fail += 1
                print(f"not JSON: {rec['doc']!r}: {e}")
                continue
            errors = list(validators[key].iter_errors(doc))
            if errors:
                n_fail += 1
                if n_fail <= 20:
                    print(f"INVALID doc {rec['doc']!r}\n  schema {key}\n  error {errors[0].message}")
    print(f"validate_docs.py: {n_docs} documents, {len(validators)} schemas, {n_fail} failures; "
          f"formats checked: {sorted(checker.checkers)}")
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
