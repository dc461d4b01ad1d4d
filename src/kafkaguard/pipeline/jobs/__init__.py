"""Extract-transform-load jobs (the only pipeline modules doing I/O). Each job module has ``run(spark, ...)``
for programs and tests; ``entry`` is the one command line of all four (``python -m kafkaguard.pipeline.jobs``,
``spark-submit``, and ``kafkaguard audit``, which forwards to it). No job module imports a CLI framework: a job
runs where only ``kafkaguard[spark]`` is installed."""
