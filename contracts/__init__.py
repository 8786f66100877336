"""The files between the method's stages: one module per file, each with
its one writer and its one reader (docs/FILES.md).

=====================  =============================================  ===================
module                 file                                           written by
=====================  =============================================  ===================
``raw_trace``          ``trace/raw/`` (per rank, before the merge)    instrument trace
``merge``              raw files -> ``trace/`` tables and meta        instrument trace
``trace``              ``trace/`` (``load_trace``)                    (the merge)
``trace_checks``       the trace's checks, used by ``trace``
``representatives``    ``representatives.csv``                        cluster
``msglog``             ``msglog/`` (message log, ``record.json``)     instrument record
``replayed``           ``replay/rank<R>.csv``                         replay
``variability``        ``replay/variability_rank<R>.csv``,            replay, replay.expand
                       ``variability.csv``
``compute``            ``compute.csv``                                replay.expand
``prediction``         ``prediction/<platform>.json``                 netsim
``validation``         ``validate.json``                              validate
``tables``, ``output`` the CSV tables' and JSON files' common reading
                       and atomic writing
=====================  =============================================  ===================

The stages import these and the MPI model (``mpimodel``), never each
other.  Nothing here imports a stage.  The platform YAML is read by the
simulator that interprets it (``netsim.platform``).
"""
