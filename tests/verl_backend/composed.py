"""verl's trainer config composed as ``main_ppo`` composes it (Hydra), for tests that check our overrides."""

from __future__ import annotations

from pathlib import Path

VERL_CONFIG_DIR = Path(__import__("verl").__file__).parent / "trainer" / "config"


def compose_verl(overrides: list[str]):
    """verl 0.9.1's ppo_trainer config with ``overrides`` applied."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(VERL_CONFIG_DIR), version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)
