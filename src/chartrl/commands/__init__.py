"""One module per ``chartrl <stage>`` command group; each has ``register(subparsers)``."""
