"""Extra-P's predictions for the scaling benchmark (runs in Extra-P's own
environment: ``python -m venv X && X/bin/pip install extrap``).

    X/bin/python bench/extrap_predict.py IN.json OUT.json

IN.json: a list of {"params": [names], "train": [[values..., time], ...],
"test": [[values...], ...]}; OUT.json: per entry the predicted times at
"test" (null where Extra-P failed), and its model as text.  Repeats are
passed as they are (Extra-P models their mean, or the median if asked).
Negative exponents are allowed, as in the comparison the scaling package
is measured against.
"""
import json
import sys
import tempfile
import warnings
from collections import defaultdict

import numpy as np

warnings.filterwarnings("ignore")


def predict(entry):
    from extrap.fileio.file_reader.text_file_reader import TextFileReader
    from extrap.modelers.model_generator import ModelGenerator
    names = entry["params"]
    runs = defaultdict(list)
    for *x, t in entry["train"]:
        runs[tuple(x)].append(t)
    lines = [f"PARAMETER {n}" for n in names] + [""]
    lines += [f"POINTS ( {' '.join(f'{v:g}' for v in x)} )" for x in runs] + ["", "METRIC time",
                                                                             "REGION r"]
    lines += ["DATA " + " ".join(repr(float(v)) for v in ts) for ts in runs.values()]
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write("\n".join(lines) + "\n")
        f.flush()
        exp = TextFileReader().read_experiment(f.name)
    gen = ModelGenerator(exp)
    single = getattr(gen.modeler, "single_parameter_modeler", gen.modeler)
    single.allow_negative_exponents = True
    gen.model_all()
    model = next(iter(gen.models.values()))
    fn = model.hypothesis.function
    pts = np.asarray(entry["test"], float)
    if len(names) == 1:
        pred = [float(fn.evaluate(p[0])) for p in pts]
    else:
        pred = [float(np.asarray(fn.evaluate(p.reshape(-1, 1))).ravel()[0]) for p in pts]
    return {"pred": pred, "model": fn.to_string(*names)}


def main():
    entries = json.load(open(sys.argv[1]))
    out = []
    for e in entries:
        try:
            out.append(predict(e))
        except Exception as err:          # one failed fit must not stop the table
            out.append({"pred": None, "model": f"failed: {err}"})
    json.dump(out, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
