# Representative replay (METHODS.md, M1), one rule per step.
import os
import sys

configfile: "config/config.yaml"

PY = sys.executable
MPIEXEC = os.path.join(os.path.dirname(PY), "mpiexec")
RES = config.get("results", "results")
APP = " ".join([config["app"]["script"]] + [str(a) for a in config["app"].get("args", [])])
CL = config.get("cluster", {})
PLATFORMS = {os.path.splitext(os.path.basename(p))[0]: p for p in config["platforms"]}
# waiting ranks yield their core: oversubscribed host runs behave
os.environ.setdefault("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")


rule all:
    input:
        f"{RES}/trace_summary.txt",
        f"{RES}/representatives.csv",
        expand(f"{RES}/prediction/{{platform}}.json", platform=PLATFORMS),


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


rule cluster:
    """S2: group ranks by communication sequence, cluster computation vectors,
    pick one representative per cluster."""
    input:
        f"{RES}/trace",
    output:
        reps=f"{RES}/representatives.csv",
        summary=f"{RES}/representatives_summary.csv",
        plot=f"{RES}/dendrogram.png",
    log:
        f"{RES}/logs/cluster.log",
    benchmark:
        f"{RES}/benchmarks/cluster.tsv"
    params:
        metric=CL.get("metric", "manhattan"),
        linkage=CL.get("linkage", "complete"),
        threshold=CL.get("threshold", 0.05),
        vector=CL.get("vector", "cpu"),
    shell:
        "{PY} -m cluster {input} -o {output.reps} --summary {output.summary} "
        "--metric {params.metric} --linkage {params.linkage} --threshold {params.threshold} "
        "--vector {params.vector} --plot {output.plot} > {log} 2>&1"


rule simulate:
    """S6: simulate the full-scale run on a target platform."""
    input:
        trace=f"{RES}/trace",
        platform=lambda w: PLATFORMS[w.platform],
    output:
        prediction=f"{RES}/prediction/{{platform}}.json",
        timeline=f"{RES}/prediction/{{platform}}_timeline.json",
    log:
        f"{RES}/logs/simulate_{{platform}}.log",
    benchmark:
        f"{RES}/benchmarks/simulate_{{platform}}.tsv"
    params:
        vector=CL.get("vector", "cpu"),
    shell:
        "{PY} -m netsim {input.trace} --platform {input.platform} --vector {params.vector} "
        "-o {output.prediction} --timeline {output.timeline} > {log} 2>&1"
