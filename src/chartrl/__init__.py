"""chartrl: a vision-language model learns to edit charts (highlight, mask, draw) before it answers."""

__version__ = "0.1.0"
