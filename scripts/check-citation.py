#!/usr/bin/env python3
"""CITATION.cff against the Citation File Format 1.2.0 JSON schema (the copy PyPI cffconvert 2.0.0 ships,
installed by scripts/install-oracles.sh), validated by PyPI jsonschema. Two broken variants of the file (an
unknown key, a malformed date) must be rejected too, so the check itself can fail."""
import copy
import datetime
import json
import pathlib
import sys

import jsonschema
import yaml


def schema():
    # Only the schema file cffconvert carries: found without importing the package, whose imports need
    # dependencies (pykwalify, ...) that install-oracles.sh leaves out.
    import importlib.util
    spec = importlib.util.find_spec("cffconvert")
    path = pathlib.Path(spec.origin).parent / "schemas" / "1.2.0" / "schema.json"
    return json.loads(path.read_text())


def as_json(value):
    # YAML reads unquoted dates as dates; CFF's schema wants their ISO text.
    if isinstance(value, dict):
        return {k: as_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_json(v) for v in value]
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return value


def errors(validator, doc):
    return sorted(e.message for e in validator.iter_errors(doc))


def main():
    path = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent / "CITATION.cff")
    doc = as_json(yaml.safe_load(path.read_text()))
    s = schema()
    validator_class = jsonschema.validators.validator_for(s)
    validator = validator_class(s, format_checker=validator_class.FORMAT_CHECKER)
    found = errors(validator, doc)
    if found:
        print(f"{path}: not valid CFF 1.2.0:", *found, sep="\n  ")
        return 1
    unknown = copy.deepcopy(doc)
    unknown["bogus-key"] = 1
    bad_date = copy.deepcopy(doc)
    bad_date["date-released"] = "4 December 2026"
    for name, variant in (("an unknown key", unknown), ("a malformed date", bad_date)):
        if not errors(validator, variant):
            print(f"the schema check accepted {name}: it cannot fail")
            return 1
    print(f"{path}: valid CFF {doc['cff-version']} (schema {s.get('$id', '1.2.0')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
