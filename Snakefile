# Representative replay (docs/METHODS.md): one rule per step of the method.
#
#   trace -> cluster -> record -> replay (one job per representative)
#         -> expand -> simulate (one per target platform) -> report
#   optional: calibrate (measure the target's network), validate (run for real)
#
# Logic lives in the packages; rules only wire files.  Config: config/config.yaml
# (validated against config/config.schema.yaml).
import os
import sys

from snakemake.utils import validate

configfile: "config/config.yaml"


validate(config, "config/config.schema.yaml")

PY = sys.executable
MPIEXEC = os.path.join(os.path.dirname(PY), "mpiexec")
RES = config["results"]
N = config["ranks"]
# Everything a rule's result depends on is an input or a param, so that a
# changed config reruns what it changes (Snakemake compares params).
APP = " ".join((["-m"] if config["app"]["module"] else []) + [config["app"]["script"]]
               + [str(a) for a in config["app"]["args"]])
# the application's script (a module has none): a changed script reruns its runs
APP_FILES = [] if config["app"]["module"] else [config["app"]["script"]]
MPIRUN = f"{MPIEXEC} -n {N} {PY}"          # the full-scale run on the host
# runs on the target (calibrate, validate): the site's mpiexec, or an
# emulated cluster's launcher (python -m emulate up)
TARGET_MPIEXEC = config["target"].get("mpiexec", MPIEXEC)
if not (os.path.isfile(TARGET_MPIEXEC) and os.access(TARGET_MPIEXEC, os.X_OK)):
    raise WorkflowError(f"config: target.mpiexec: {TARGET_MPIEXEC} is not an executable file")
CL = config["cluster"]
COUNT = "--count-c-calls" if config["count_c_calls"] else ""
# the software of every rule, for `snakemake --use-conda` (the README's
# commands install the same into .venv)
ENV = "config/envs/repreplay.yaml"
# the target candidates, by name; "calibrated" is the platform the
# calibrate rule measures (and a platform file like the others)
CALIBRATED = f"{RES}/calibrate/calibrated.yaml"
PLATFORMS = {("calibrated" if p == "calibrated" else os.path.splitext(os.path.basename(p))[0]):
             (CALIBRATED if p == "calibrated" else p) for p in config["platforms"]}
for _name, _path in PLATFORMS.items():
    if _path != CALIBRATED and not os.path.exists(_path):
        raise WorkflowError(f"config: platforms: {_path} does not exist")
    if _path != CALIBRATED:
        # checked now, not at the simulate step after the whole pipeline ran
        from netsim.platform import PlatformError, load_platform
        try:
            load_platform(_path)
        except PlatformError as _e:
            raise WorkflowError(f"config: platforms: {_e}") from None
for _f in APP_FILES:
    if not os.path.exists(_f):
        raise WorkflowError(f"config: app.script: {_f} does not exist")
VALIDATE = config["validate"]["enabled"]
CALIBRATE = config["calibrate"]["enabled"] or "calibrated" in PLATFORMS
TEMPLATE = config["calibrate"].get("template")
if TEMPLATE and not os.path.exists(TEMPLATE):
    raise WorkflowError(f"config: calibrate.template: {TEMPLATE} does not exist")
if VALIDATE and config["validate"].get("platform") not in PLATFORMS:
    raise WorkflowError("config: validate.platform must name one of the platforms "
                        f"({', '.join(PLATFORMS)}) by file name without .yaml")
# waiting ranks yield their core: oversubscribed host runs behave
os.environ.setdefault("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")
# under SLURM the job itself already runs in a step that holds the allocation;
# mpiexec's own srun (hydra's slurm bootstrap) must share it, not wait for it
os.environ.setdefault("SLURM_OVERLAP", "1")


rule all:
    input:
        f"{RES}/report.html",


rule trace:
    """Step 1: run the application at full scale N on the host, every MPI call traced."""
    input:
        APP_FILES,
    output:
        directory(f"{RES}/trace"),
    log:
        f"{RES}/logs/trace.log",
    benchmark:
        f"{RES}/benchmarks/trace.tsv"
    params:
        mpirun=MPIRUN,
        c_calls=COUNT,
        app=APP,
    resources:
        tasks=N,
    conda:
        ENV
    shell:
        "{params.mpirun} -m instrument trace {params.c_calls} -o {output} --force {params.app} "
        "> {log} 2>&1"


rule trace_summary:
    """The trace in words: ranks, events per op, bytes, computation share."""
    input:
        f"{RES}/trace",
    output:
        f"{RES}/trace_summary.txt",
    log:
        f"{RES}/logs/trace_summary.log",
    benchmark:
        f"{RES}/benchmarks/trace_summary.tsv"
    params:
        py=PY,
    conda:
        ENV
    shell:
        "{params.py} -m instrument show {input} > {output} 2> {log}"


checkpoint cluster:
    """Step 2: group ranks by communication sequence, cluster their computation
    vectors, pick the member closest to each cluster's centroid."""
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
        py=PY,
        c=CL,
    conda:
        ENV
    shell:
        "{params.py} -m cluster {input} -o {output.reps} --summary {output.summary} "
        "--metric {params.c[metric]} --linkage {params.c[linkage]} "
        "--threshold {params.c[threshold]} --vector {params.c[vector]} "
        "--plot {output.plot} > {log} 2>&1"


rule record:
    """Step 3: run the application again on the host, logging everything
    that flows into the representatives."""
    input:
        APP_FILES,
        reps=f"{RES}/representatives.csv",
    output:
        directory(f"{RES}/msglog"),
    log:
        f"{RES}/logs/record.log",
    benchmark:
        f"{RES}/benchmarks/record.tsv"
    params:
        mpirun=MPIRUN,
        app=APP,
    resources:
        tasks=N,
    conda:
        ENV
    shell:
        "{params.mpirun} -m instrument record --reps {input.reps} -o {output} --force "
        "{params.app} > {log} 2>&1"


rule replay:
    """Step 4: replay one representative alone on a target node (on SLURM:
    its own one-node job in the target partition)."""
    input:
        APP_FILES,
        log=f"{RES}/msglog",
    output:
        f"{RES}/replay/rank{{rank}}.csv",
    log:
        f"{RES}/logs/replay_rank{{rank}}.log",
    benchmark:
        f"{RES}/benchmarks/replay_rank{{rank}}.tsv"
    params:
        py=PY,
        n=N,
        out=lambda w, output: os.path.dirname(output[0]),
        repeats=config["replay"]["repeats"],
        load=config["replay"]["load"],
        app=APP,
    resources:
        tasks=max(1, config["replay"]["load"]),
    conda:
        ENV
    shell:
        "{params.py} -m replay --rank {wildcards.rank} --size {params.n} --log {input.log} "
        "-o {params.out} --repeats {params.repeats} --load {params.load} {params.app} "
        "> {log} 2>&1"


def replayed(wildcards):
    """The replay outputs of the representatives the clustering chose."""
    from cluster.representatives import representative_ranks
    return [f"{RES}/replay/rank{r}.csv"
            for r in representative_ranks(checkpoints.cluster.get().output.reps, N)]


rule expand:
    """Step 5: every rank takes its representative's target computation times."""
    input:
        trace=f"{RES}/trace",
        reps=f"{RES}/representatives.csv",
        replayed=replayed,
    output:
        f"{RES}/compute.csv",
    log:
        f"{RES}/logs/expand.log",
    benchmark:
        f"{RES}/benchmarks/expand.tsv"
    params:
        py=PY,
        replayed=lambda w, input: os.path.dirname(input.replayed[0]),
        scale=config["replay"]["scale"],
        vector=CL["vector"],
    conda:
        ENV
    shell:
        "{params.py} -m replay.expand {input.trace} {input.reps} {params.replayed} "
        "-o {output} --scale {params.scale} --vector {params.vector} > {log} 2>&1"


rule simulate:
    """Step 6: simulate the full-scale run on a target platform."""
    input:
        trace=f"{RES}/trace",
        compute=f"{RES}/compute.csv",
        platform=lambda w: PLATFORMS[w.platform],
    output:
        prediction=f"{RES}/prediction/{{platform}}.json",
        timeline=f"{RES}/prediction/{{platform}}_timeline.json",
    log:
        f"{RES}/logs/simulate_{{platform}}.log",
    benchmark:
        f"{RES}/benchmarks/simulate_{{platform}}.tsv"
    params:
        py=PY,
    conda:
        ENV
    shell:
        "{params.py} -m netsim {input.trace} --platform {input.platform} --compute {input.compute} "
        "-o {output.prediction} --timeline {output.timeline} > {log} 2>&1"


rule calibrate:
    """Measure the target's network (ping-pongs and windows of messages over
    sizes and placements) and fit latency, per-byte time and the measured
    curves per level into a platform file (into calibrate.template's
    innermost level, when one is given)."""
    input:
        [TEMPLATE] if TEMPLATE else [],
    output:
        raw=f"{RES}/calibrate/pingpong.csv",
        platform=CALIBRATED,
    log:
        f"{RES}/logs/calibrate.log",
    benchmark:
        f"{RES}/benchmarks/calibrate.tsv"
    params:
        py=PY,
        mpiexec=TARGET_MPIEXEC,
        c=config["calibrate"],
        template=f"--template {TEMPLATE}" if TEMPLATE else "",
    resources:
        tasks=config["calibrate"]["ranks"],
    threads: config["calibrate"]["ranks"]   # one core per rank: timings, not throughput
    conda:
        ENV
    shell:
        # busy-polling waits: the latency a dedicated run sees
        "(MPIR_CVAR_ENABLE_HEAVY_YIELD=0 {params.mpiexec} -n {params.c[ranks]} {params.py} "
        "-m calibrate measure --max-bytes {params.c[max_bytes]} -o {output.raw} && "
        "{params.py} -m calibrate fit {output.raw} --cores-per-node {params.c[cores_per_node]} "
        "--nodes {params.c[nodes]} {params.template} -o {output.platform}) > {log} 2>&1"


rule validate:
    """Run the application for real at N on the target and compare."""
    input:
        APP_FILES,
        prediction=lambda w: f"{RES}/prediction/{config['validate']['platform']}.json",
    output:
        f"{RES}/validate.json",
    log:
        f"{RES}/logs/validate.log",
    benchmark:
        f"{RES}/benchmarks/validate.tsv"
    params:
        py=PY,
        mpiexec=TARGET_MPIEXEC,
        n=N,
        repeats=config["validate"]["repeats"],
        app=APP,
    resources:
        tasks=N,
    threads: N   # a dedicated run: nothing else on these cores meanwhile
    conda:
        ENV
    shell:
        "{params.py} -m validate --prediction {input.prediction} --size {params.n} "
        "--repeats {params.repeats} --mpiexec {params.mpiexec} -o {output} -- {params.app} "
        "> {log} 2>&1"


rule report:
    """The prediction, per rank and per platform, with representatives,
    dendrogram, timeline excerpt and (when run) the measured time."""
    input:
        predictions=expand(f"{RES}/prediction/{{p}}.json", p=PLATFORMS),
        timelines=expand(f"{RES}/prediction/{{p}}_timeline.json", p=PLATFORMS),
        reps=f"{RES}/representatives.csv",
        summary=f"{RES}/representatives_summary.csv",
        dendrogram=f"{RES}/dendrogram.png",
        trace_summary=f"{RES}/trace_summary.txt",
        validate=[f"{RES}/validate.json"] if VALIDATE else [],
        calibrated=[CALIBRATED] if CALIBRATE else [],
    output:
        report(f"{RES}/report.html", caption="config/report.rst", category="Prediction"),
    log:
        f"{RES}/logs/report.log",
    benchmark:
        f"{RES}/benchmarks/report.tsv"
    params:
        py=PY,
        optional=lambda w, input: " ".join(
            ([f"--validate {input.validate[0]}"] if input.validate else [])
            + ([f"--calibrated {input.calibrated[0]}"] if input.calibrated else [])),
    conda:
        ENV
    shell:
        "{params.py} -m report --predictions {input.predictions} --timelines {input.timelines} "
        "--reps {input.reps} --summary {input.summary} --dendrogram {input.dendrogram} "
        "--trace-summary {input.trace_summary} {params.optional} -o {output} > {log} 2>&1"
