# Representative replay (docs/METHODS.md): one rule per step of the method.
#
#   trace -> cluster -> record -> replay (one job per representative)
#         -> expand -> simulate (one per target platform) -> report
#   beyond the host's scale (trace.extrapolate_from): at each small N, trace ->
#         cluster -> record -> replay -> expand; then extrapolate (the trace at N,
#         its computation fitted to the small runs' replayed times) -> cluster,
#         simulate -> report (files of every N in results/nN/)
#   optional: calibrate (measure the target's network), validate (run for real)
#   a list of ranks: the above once per N (results/nN/), then scaling
#         (extrapolate the predicted times, the scalability metric) -> report
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
# a scalability study when ranks is a list: every N's pipeline in RES/nN
STUDY = isinstance(config["ranks"], list)
RANKS = sorted(set(config["ranks"])) if STUDY else [config["ranks"]]
N = RANKS[-1]
# the trace at N extrapolated from traces at small N (docs/METHODS.md §8):
# each small N's pipeline in RES/nN too, up to its replayed computation
SMALL = sorted(config["trace"]["extrapolate_from"])
REPLAYED_SMALL = bool(SMALL) and config["trace"]["extrapolate_computation"] == "replayed"
PER_N = STUDY or bool(SMALL)
RUN = f"{RES}/n{{n}}" if PER_N else RES      # one N's files
LAST = RUN.format(n=N) if PER_N else RES     # N's own: the report's details


def ranks_of(wildcards):
    """N of the pipeline a job belongs to."""
    return int(wildcards.n) if PER_N else N


def extrapolated(wildcards):
    """Whether the job belongs to the pipeline at N built by extrapolation."""
    return bool(SMALL) and ranks_of(wildcards) == N


wildcard_constraints:
    n=r"\d+",

# Everything a rule's result depends on is an input or a param, so that a
# changed config reruns what it changes (Snakemake compares params).
APP = " ".join((["-m"] if config["app"]["module"] else []) + [config["app"]["script"]]
               + [str(a) for a in config["app"]["args"]])
# the application's script (a module has none): a changed script reruns its runs
APP_FILES = [] if config["app"]["module"] else [config["app"]["script"]]
# the full-scale run on the host
MPIRUN = lambda w: f"{MPIEXEC} -n {ranks_of(w)} {PY}"  # noqa: E731
# runs on the target (calibrate, validate): the site's mpiexec, or an
# emulated cluster's launcher (python -m emulate up)
TARGET_MPIEXEC = config["target"].get("mpiexec", MPIEXEC)
if not (os.path.isfile(TARGET_MPIEXEC) and os.access(TARGET_MPIEXEC, os.X_OK)):
    raise WorkflowError(f"config: target.mpiexec: {TARGET_MPIEXEC} is not an executable file")
# the replay's copies on the target node's cores: started through target.bind
# (an emulated cluster's virtual cores) where given
TARGET_BIND = config["target"].get("bind")
if TARGET_BIND and not (os.path.isfile(TARGET_BIND) and os.access(TARGET_BIND, os.X_OK)):
    raise WorkflowError(f"config: target.bind: {TARGET_BIND} is not an executable file")
BIND = f"--bind-command {TARGET_BIND}" if TARGET_BIND else ""
CL = config["cluster"]
VAR = config["variability"]
# YAML reads an unquoted `off` as false
ROLES = "off" if CL["object_roles"] in ("off", False) else CL["object_roles"]
COUNT = "--c-calls" if config["count_c_calls"] else "--no-c-calls"
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
if SMALL and (STUDY or len(SMALL) < 2 or N in SMALL):
    raise WorkflowError("config: trace.extrapolate_from needs two small N or more, and one "
                        "N in ranks (not a list) that is not among them")
VALIDATE = config["validate"]["enabled"]
CALIBRATE = config["calibrate"]["enabled"] or "calibrated" in PLATFORMS
TEMPLATE = config["calibrate"].get("template")
if config["calibrate"]["peers"] == 1:
    raise WorkflowError("config: calibrate.peers: 1 rank has no peer; 0 (none) or at least 2")
# the calibrate rule's widest run: its measurement or its peers'
CALIBRATE_RANKS = max(config["calibrate"]["ranks"], config["calibrate"]["peers"])
if TEMPLATE and not os.path.exists(TEMPLATE):
    raise WorkflowError(f"config: calibrate.template: {TEMPLATE} does not exist")
if VALIDATE and config["validate"].get("platform") not in PLATFORMS:
    raise WorkflowError("config: validate.platform must name one of the platforms "
                        f"({', '.join(PLATFORMS)}) by file name without .yaml")
# how ranks wait in MPI is the tracer's choice, per node: they yield their
# core only where a node has more ranks than cores (instrument/waits.py)
# under SLURM the job itself already runs in a step that holds the allocation;
# mpiexec's own srun (hydra's slurm bootstrap) must share it, not wait for it
os.environ.setdefault("SLURM_OVERLAP", "1")


# the target node elsewhere: pack the replay, stop until its results are back
BUNDLE = config["target"].get("bundle")
BUNDLE_DIR = (f"{BUNDLE}/n{{n}}" if PER_N else BUNDLE) if BUNDLE else None
# every replayed N's bundle (the study's N, or the small N extrapolated from)
REPLAYED_N = SMALL if SMALL else RANKS
BUNDLES = [BUNDLE_DIR.format(n=n) for n in REPLAYED_N] if BUNDLE else []
AWAITED = [d for d in BUNDLES if not os.path.exists(f"{d}/results.tar.gz")]


rule all:
    input:
        [f"{d}/bundle.tar.gz" for d in AWAITED] if AWAITED else f"{RES}/report.html",


onsuccess:
    if AWAITED:
        print("\nThe replay is packed for the target node: for each of\n"
              + "".join(f"  {d}/bundle.tar.gz\n" for d in AWAITED)
              + "copy it there, run `tar xzf bundle.tar.gz && bash bundle/run.sh`, put the "
              "results.tar.gz it writes beside the bundle, and run snakemake again.")


rule trace:
    """Step 1: run the application at full scale N on the host, every MPI call
    traced (beyond the host's scale: at each small N instead)."""
    input:
        APP_FILES,
    output:
        directory(f"{RUN}/trace"),
    log:
        f"{RUN}/logs/trace.log",
    benchmark:
        f"{RUN}/benchmarks/trace.tsv"
    wildcard_constraints:
        # N itself is the extrapolate rule's
        n="|".join(map(str, SMALL)) if SMALL else r"\d+",
    params:
        mpirun=MPIRUN,
        c_calls=COUNT,
        app=APP,
    resources:
        tasks=ranks_of,
    conda:
        ENV
    shell:
        "{params.mpirun} -m instrument trace {params.c_calls} -o {output} --force "
        "{params.app} > {log} 2>&1"


if SMALL:

    rule extrapolate:
        """The trace at N from the small traces: position classes, peers as
        grid offsets, sizes fitted exactly, computation (the small runs'
        replayed times, or the traces' CPU seconds) with its interval, and
        each class's variability (its representative's copies in the
        largest small run, or its members' spread in the largest trace)."""
        input:
            traces=expand(f"{RES}/n{{k}}/trace", k=SMALL),
            compute=expand(f"{RES}/n{{k}}/compute.csv", k=SMALL) if REPLAYED_SMALL else [],
            variability=f"{RES}/n{SMALL[-1]}/variability.csv" if REPLAYED_SMALL else [],
        output:
            directory(f"{LAST}/trace"),
        log:
            f"{LAST}/logs/extrapolate.log",
        benchmark:
            f"{LAST}/benchmarks/extrapolate.tsv"
        params:
            py=PY,
            n=N,
            uneven=config["trace"]["extrapolate_uneven"],
            compute=lambda w, input: (
                f"--compute {' '.join(input.compute)} --variability {input.variability}"
                if input.compute else ""),
        conda:
            ENV
        shell:
            "{params.py} -m extrapolate {input.traces} --ranks {params.n} -o {output} --force "
            "--uneven {params.uneven} {params.compute} > {log} 2>&1"


rule trace_summary:
    """The trace in words: ranks, events per op, bytes, computation share."""
    input:
        f"{RUN}/trace",
    output:
        f"{RUN}/trace_summary.txt",
    log:
        f"{RUN}/logs/trace_summary.log",
    benchmark:
        f"{RUN}/benchmarks/trace_summary.tsv"
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
        f"{RUN}/trace",
    output:
        reps=f"{RUN}/representatives.csv",
        summary=f"{RUN}/representatives_summary.csv",
        plot=f"{RUN}/dendrogram.png",
    log:
        f"{RUN}/logs/cluster.log",
    benchmark:
        f"{RUN}/benchmarks/cluster.tsv"
    params:
        py=PY,
        c=CL,
        roles=ROLES,
    conda:
        ENV
    shell:
        "{params.py} -m cluster {input} -o {output.reps} --summary {output.summary} "
        "--metric {params.c[metric]} --linkage {params.c[linkage]} "
        "--threshold {params.c[threshold]} --vector {params.c[vector]} "
        "--object-roles {params.roles} --plot {output.plot} > {log} 2>&1"


rule find_loops:
    """Step 3a: find each representative's main loop, where its replay may
    stop after a warm-up and replay.partial iterations, auto: as many as a
    precise mean needs (or why it may not)."""
    input:
        trace=f"{RUN}/trace",
        reps=f"{RUN}/representatives.csv",
    output:
        f"{RUN}/partial.csv",
    log:
        f"{RUN}/logs/find_loops.log",
    benchmark:
        f"{RUN}/benchmarks/find_loops.tsv"
    params:
        py=PY,
        k=config["replay"]["partial"],
    conda:
        ENV
    shell:
        "{params.py} -m replay.loops {input.trace} {input.reps} -o {output} "
        "--iterations {params.k} > {log} 2>&1"


rule record:
    """Step 3: run the application again on the host, logging everything
    that flows into the representatives (up to where partial replay stops)."""
    input:
        APP_FILES,
        reps=f"{RUN}/representatives.csv",
        partial=f"{RUN}/partial.csv",
    output:
        directory(f"{RUN}/msglog"),
    log:
        f"{RUN}/logs/record.log",
    benchmark:
        f"{RUN}/benchmarks/record.tsv"
    params:
        mpirun=MPIRUN,
        app=APP,
        c_calls=COUNT,
    resources:
        tasks=ranks_of,
    conda:
        ENV
    shell:
        "{params.mpirun} -m instrument record {params.c_calls} --reps {input.reps} "
        "--partial {input.partial} -o {output} --force "
        "{params.app} > {log} 2>&1"


if BUNDLE:

    rule pack:
        """Step 4, on a node elsewhere: pack the representatives' logs, the
        application and its requirements into one archive for the target."""
        input:
            APP_FILES,
            log=f"{RUN}/msglog",
        output:
            f"{BUNDLE_DIR}/bundle.tar.gz",
        log:
            f"{RUN}/logs/pack.log",
        params:
            py=PY,
            repeats=config["replay"]["repeats"],
            load=config["replay"]["load"],
            wheels="--wheels" if config["target"].get("bundle_wheels") else "",
        conda:
            ENV
        shell:
            "{params.py} -m replay pack --log {input.log} -o {output} {params.wheels} "
            "--repeats {params.repeats} --load {params.load} > {log} 2>&1"

    rule unpack:
        """Step 4, back from the node elsewhere: one representative's replay
        out of the results its bundle wrote there, checked."""
        input:
            bundle=f"{BUNDLE_DIR}/bundle.tar.gz",
            results=f"{BUNDLE_DIR}/results.tar.gz",
        output:
            replay=f"{RUN}/replay/rank{{rank}}.csv",
            variability=f"{RUN}/replay/variability_rank{{rank}}.csv",
        log:
            f"{RUN}/logs/unpack_rank{{rank}}.log",
        params:
            py=PY,
            out=lambda w, output: os.path.dirname(output.replay),
        conda:
            ENV
        shell:
            "{params.py} -m replay unpack {input.results} --bundle {input.bundle} "
            "--rank {wildcards.rank} -o {params.out} --force > {log} 2>&1"


rule replay:
    """Step 4: replay one representative alone on a target node (on SLURM:
    its own one-node job in the target partition), as replay.load copies
    bound to cores over replay.repeats rounds: its computation times there,
    and how much they vary from core to core, run to run and span to span."""
    input:
        APP_FILES,
        log=f"{RUN}/msglog",
    output:
        replay=f"{RUN}/replay/rank{{rank}}.csv",
        variability=f"{RUN}/replay/variability_rank{{rank}}.csv",
    log:
        f"{RUN}/logs/replay_rank{{rank}}.log",
    benchmark:
        f"{RUN}/benchmarks/replay_rank{{rank}}.tsv"
    params:
        py=PY,
        n=ranks_of,
        out=lambda w, output: os.path.dirname(output.replay),
        repeats=config["replay"]["repeats"],
        load=config["replay"]["load"],
        bind=BIND,
        app=APP,
    resources:
        tasks=max(1, config["replay"]["load"]),
    conda:
        ENV
    shell:
        "{params.py} -m replay --ranks {wildcards.rank} --size {params.n} --log {input.log} "
        "-o {params.out} --repeats {params.repeats} --load {params.load} {params.bind} "
        "{params.app} > {log} 2>&1"


if BUNDLE:

    ruleorder: unpack > replay


def replayed(wildcards):
    """The replay outputs of the representatives the clustering chose."""
    from contracts.representatives import representative_ranks
    run = RUN.format(**wildcards)
    reps = checkpoints.cluster.get(**wildcards).output.reps
    return [f"{run}/replay/{f}{r}.csv" for r in representative_ranks(reps, ranks_of(wildcards))
            for f in ("rank", "variability_rank")]


rule expand:
    """Step 5: every rank takes its representative's target computation
    times; the representatives' measured variability goes beside them."""
    input:
        trace=f"{RUN}/trace",
        reps=f"{RUN}/representatives.csv",
        replayed=replayed,
    output:
        compute=f"{RUN}/compute.csv",
        variability=f"{RUN}/variability.csv",
    log:
        f"{RUN}/logs/expand.log",
    benchmark:
        f"{RUN}/benchmarks/expand.tsv"
    params:
        py=PY,
        replayed=lambda w, input: os.path.dirname(input.replayed[0]),
        scale=config["replay"]["scale"],
        vector=CL["vector"],
        faults="" if config["replay"]["fault_charge"] else "--no-fault-charge",
    conda:
        ENV
    shell:
        "{params.py} -m replay.expand {input.trace} {input.reps} {params.replayed} "
        "-o {output.compute} --variability {output.variability} --scale {params.scale} "
        "--vector {params.vector} {params.faults} > {log} 2>&1"


rule simulate:
    """Step 6: simulate the full-scale run on a target platform: seeded
    samples of the ranks' measured variability (of the representatives'
    copies, or, for an extrapolated trace, of each position class's), the
    median sample the prediction and the 5-95 % range its
    band."""
    input:
        trace=f"{RUN}/trace",
        # an extrapolated trace carries its own (fitted) computation
        compute=lambda w: ([] if extrapolated(w)
                           else os.path.join(RUN.format(**w), "compute.csv")),
        variability=lambda w: ([] if extrapolated(w)
                               else os.path.join(RUN.format(**w), "variability.csv")),
        platform=lambda w: PLATFORMS[w.platform],
    output:
        prediction=f"{RUN}/prediction/{{platform}}.json",
        timeline=f"{RUN}/prediction/{{platform}}_timeline.json",
    log:
        f"{RUN}/logs/simulate_{{platform}}.log",
    benchmark:
        f"{RUN}/benchmarks/simulate_{{platform}}.tsv"
    params:
        py=PY,
        v=VAR,      # a plain value: a changed variability config reruns the simulations
        # an extrapolated trace samples each position class's variability
        # (its representative's copies, or its members' spread)
        measured=lambda w, input: (
            f"--class-variability --samples {VAR['samples']} --seed {VAR['seed']}"
            if extrapolated(w)
            else f"--compute {input.compute} --variability {input.variability} "
                 f"--samples {VAR['samples']} --seed {VAR['seed']}"),
    conda:
        ENV
    shell:
        "{params.py} -m netsim {input.trace} --platform {input.platform} {params.measured} "
        "-o {output.prediction} --timeline {output.timeline} > {log} 2>&1"


rule calibrate:
    """Measure the target's network (ping-pongs and windows of messages over
    sizes and placements) and fit latency, per-byte time and the measured
    curves per level into a platform file (into calibrate.template's
    innermost level, when one is given); with calibrate.peers, each level
    at its median pair among the small ping-pongs of every pair of that many
    ranks."""
    input:
        [TEMPLATE] if TEMPLATE else [],
    output:
        raw=f"{RES}/calibrate/pingpong.csv",
        peers=[f"{RES}/calibrate/peers.csv"] if config["calibrate"]["peers"] else [],
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
        # every pair at the eager sizes only: each level's latency
        peers=lambda w, output: (
            f"&& MPIR_CVAR_ENABLE_HEAVY_YIELD=0 {TARGET_MPIEXEC} -n {config['calibrate']['peers']} "
            f"{PY} -m calibrate measure --max-bytes 128 --only-pingpongs -o {output.peers[0]}"
            if output.peers else ""),
        fit_peers=lambda w, output: f"--peers {output.peers[0]}" if output.peers else "",
    resources:
        tasks=CALIBRATE_RANKS,
    threads: CALIBRATE_RANKS   # one core per rank: timings, not throughput
    conda:
        ENV
    shell:
        # busy-polling waits: the latency a dedicated run sees
        "(MPIR_CVAR_ENABLE_HEAVY_YIELD=0 {params.mpiexec} -n {params.c[ranks]} {params.py} "
        "-m calibrate measure --max-bytes {params.c[max_bytes]} -o {output.raw} "
        "{params.peers} && "
        "{params.py} -m calibrate fit {output.raw} --cores-per-node {params.c[cores_per_node]} "
        "--nodes {params.c[nodes]} {params.template} {params.fit_peers} "
        "-o {output.platform}) > {log} 2>&1"


rule validate:
    """Run the application for real at N on the target and compare."""
    input:
        APP_FILES,
        prediction=lambda w: os.path.join(RUN.format(**w), "prediction",
                                          config["validate"]["platform"] + ".json"),
    output:
        f"{RUN}/validate.json",
    log:
        f"{RUN}/logs/validate.log",
    benchmark:
        f"{RUN}/benchmarks/validate.tsv"
    params:
        py=PY,
        mpiexec=TARGET_MPIEXEC,
        n=ranks_of,
        repeats=config["validate"]["repeats"],
        app=APP,
    resources:
        tasks=ranks_of,
    threads: N   # a dedicated run: nothing else on these cores meanwhile
    conda:
        ENV
    shell:
        "{params.py} -m validate --prediction {input.prediction} --size {params.n} "
        "--repeats {params.repeats} --mpiexec {params.mpiexec} -o {output} -- {params.app} "
        "> {log} 2>&1"


rule scaling:
    """The scalability study (a list of ranks): the automatic model fitted to
    the predicted times of every platform (and to the measured ones where
    validate ran), extrapolated to scaling.predict with its interval, and
    the scalability metric per platform."""
    input:
        predictions=expand(f"{RES}/n{{n}}/prediction/{{p}}.json", n=RANKS, p=PLATFORMS),
        validate=expand(f"{RES}/n{{n}}/validate.json", n=RANKS) if VALIDATE else [],
    output:
        times=f"{RES}/scaling/times.csv",
        extrapolation=f"{RES}/scaling/extrapolation.csv",
        metric=f"{RES}/scaling/metric.csv",
        plot=f"{RES}/scaling/scaling.png",
    log:
        f"{RES}/logs/scaling.log",
    benchmark:
        f"{RES}/benchmarks/scaling.tsv"
    params:
        py=PY,
        out=lambda w, output: os.path.dirname(output.times),
        s=config["scaling"],
        predict=",".join(map(str, config["scaling"]["predict"])),
        validate=lambda w, input: " ".join(input.validate),
    conda:
        ENV
    shell:
        "{params.py} -m scaling study --predictions {input.predictions} "
        "--validate {params.validate} --predict '{params.predict}' --level {params.s[level]} "
        "--scaling {params.s[kind]} -o {params.out} > {log} 2>&1"


rule report:
    """The prediction, per rank and per platform, with representatives,
    dendrogram, timeline excerpt and (when run) the measured time."""
    input:
        predictions=expand(f"{LAST}/prediction/{{p}}.json", p=PLATFORMS),
        timelines=expand(f"{LAST}/prediction/{{p}}_timeline.json", p=PLATFORMS),
        reps=f"{LAST}/representatives.csv",
        summary=f"{LAST}/representatives_summary.csv",
        dendrogram=f"{LAST}/dendrogram.png",
        trace_summary=f"{LAST}/trace_summary.txt",
        # an extrapolated trace is not replayed at N: no plan there
        partial=lambda w: [] if SMALL else [f"{LAST}/partial.csv"],
        validate=[f"{LAST}/validate.json"] if VALIDATE else [],
        calibrated=[CALIBRATED] if CALIBRATE else [],
        scaling=[f"{RES}/scaling/extrapolation.csv"] if STUDY else [],
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
            + ([f"--calibrated {input.calibrated[0]}"] if input.calibrated else [])
            + ([f"--scaling {os.path.dirname(input.scaling[0])}"] if input.scaling else [])
            + ([f"--partial {input.partial[0]}"] if input.partial else [])
            # a replay carried to a node elsewhere: unpack wrote both nodes' facts
            + ([f"--nodes {LAST}/replay/nodes.json"] if BUNDLE and not SMALL else [])),
    conda:
        ENV
    shell:
        "{params.py} -m report --predictions {input.predictions} --timelines {input.timelines} "
        "--reps {input.reps} --summary {input.summary} --dendrogram {input.dendrogram} "
        "--trace-summary {input.trace_summary} {params.optional} -o {output} > {log} 2>&1"
