"""What the tools know about MPI, in one place: the operation table
(``ops``: every traced call, its kind and properties), call semantics
shared by the tracer, the recorder and the replay (``calls``: metadata of
communicators and requests, buffers as bytes), byte counting
(``bufsize``), the call kinds that record and replay what MPI answered
(``kinds``) and one-sided windows (``windows``).

Importing it imports mpi4py (``ops`` alone does not).
"""
