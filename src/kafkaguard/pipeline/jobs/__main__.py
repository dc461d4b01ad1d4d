"""``python -m kafkaguard.pipeline.jobs <job> [flags]``, and the file ``spark-submit`` runs (see ``entry``)."""

from kafkaguard.pipeline.jobs.entry import main

if __name__ == "__main__":
    raise SystemExit(main())
