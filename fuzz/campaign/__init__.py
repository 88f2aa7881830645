"""The campaign machinery: long fuzzing runs in worker processes, on top of the core library.

    runner     ``Campaign``: schedules (target, backend) pairs over worker processes, one per
               GPU; recovers from crashes, hangs and stops; triages against earlier reports
    worker     the worker process: hunts slices, streams findings, watches its memory maps
    database   example databases (directory, Redis, shared), tolerant of an unreachable one
    report     report.md / report.json / report.xml / index.html from a campaign's record
    plots      error heatmaps and histograms of a finding (for index.html)
    threads    CPU threads shared between processes on one host

The core (``fuzz``'s top-level modules) never imports these; the front ends (``fuzz.cli``,
``fuzz.pytest_plugin``, ``fuzz.bench``, ``fuzz.scoreboard``) do (``tests/fuzz/test_layers.py``).
Nothing is imported here, so a worker process starts without loading the report machinery.
"""
