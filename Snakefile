# Representative replay (METHODS.md, M1), one rule per step.
import os
import sys

configfile: "config/config.yaml"

PY = sys.executable
MPIEXEC = os.path.join(os.path.dirname(PY), "mpiexec")
RES = config.get("results", "results")
APP = " ".join([config["app"]["script"]] + [str(a) for a in config["app"].get("args", [])])
# waiting ranks yield their core: oversubscribed host runs behave
os.environ.setdefault("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")


rule all:
    input:
        f"{RES}/trace_summary.txt",


rule trace:
    """S1: run the application at full scale N with every MPI call traced."""
    output:
        directory(f"{RES}/trace"),
    log:
        f"{RES}/logs/trace.log",
    benchmark:
        f"{RES}/benchmarks/trace.tsv"
    params:
        n=config["ranks"],
    shell:
        "{MPIEXEC} -n {params.n} {PY} -m instrument trace -o {output} {APP} > {log} 2>&1"


rule trace_summary:
    """Human-readable summary of the trace."""
    input:
        f"{RES}/trace",
    output:
        f"{RES}/trace_summary.txt",
    log:
        f"{RES}/logs/trace_summary.log",
    benchmark:
        f"{RES}/benchmarks/trace_summary.tsv"
    shell:
        "{PY} -m instrument show {input} > {output} 2> {log}"
