"""The report people compare runs with: results/report/index.html (self-contained, offline) and metrics.json."""
