"""The failures chartrl reports to a person rather than as a traceback: the message names what to fix.

A model's mistakes are never among them (they are data: a counted metric, a zero reward). These are
infrastructure and input failures: a bad config, a missing file, an unreachable judge.
"""


class ChartrlError(Exception):
    """Base of the errors the CLI prints as ``chartrl: error: <message>`` and exits with ``exit_code``."""

    exit_code = 1


class UsageError(ChartrlError):
    """The command line itself is wrong."""

    exit_code = 2
