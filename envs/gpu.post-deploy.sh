#!/usr/bin/env bash
# Snakemake runs this once inside a freshly created conda environment, from the working directory.
# Install chartrl itself (no dependencies: the environment file pins them all). Run snakemake from the
# repository root, or set CHARTRL_SOURCE to the repository path.
set -euo pipefail
pip install --no-deps "${CHARTRL_SOURCE:-.}"
