"""Extract-transform-load jobs (the only pipeline modules doing I/O). Each job module has ``run(spark, ...)``
for programs and tests, and ``main()`` for ``spark-submit`` / ``python -m kafkaguard.pipeline.jobs.<job>``
that parses the same flags as ``kafkaguard audit <job>`` (the shared Typer command in ``jobs.commands``)."""
