#!/usr/bin/env bash
# Snakemake runs this once inside a freshly created conda environment, from the working directory.
# Install chartrl itself (no dependencies: the environment file pins them all). Run snakemake from the
# repository root, or set CHARTRL_SOURCE to the repository path.
# Editable: the environment imports the checkout's src/, so a later fix of a reward reaches the jobs; Snakemake
# runs this script only when it creates the environment, and a copy would stay the code of that day
# (chartrl.installation, which every launched job checks).
set -euo pipefail
pip install --no-deps --editable "${CHARTRL_SOURCE:-.}"
