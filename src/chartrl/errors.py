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


class Stopped(BaseException):
    """The job was asked to stop (SIGTERM from Snakemake, ``ray job stop`` or a head shutting down): raised in the
    main thread by :func:`raise_on_sigterm`'s handler, so that ``finally`` blocks run and an MLflow run ends
    KILLED rather than staying RUNNING. A BaseException, like KeyboardInterrupt, so no ``except Exception`` of a
    library swallows it."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # what a shell reports for a process ended by the signal (143 for SIGTERM)


def raise_on_sigterm() -> None:
    """From now on a SIGTERM raises :class:`Stopped` in the main thread (once: a second SIGTERM while the first
    unwinds is ignored, so the handlers that end the run are not themselves interrupted)."""
    import signal

    def on_sigterm(signum, _frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Stopped(signum)

    signal.signal(signal.SIGTERM, on_sigterm)
