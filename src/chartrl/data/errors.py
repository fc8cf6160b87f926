"""Infrastructure failures of the data stage (a missing file, an unreachable hub, too many rejects).

They stop the job with a message naming the file or key to fix. A bad *row* is not one of these: it becomes a
``Rejected`` entry in the card (chartrl.data.contract.RowRejected)."""

from chartrl.errors import ChartrlError


class DataSourceError(ChartrlError):
    """A source cannot be read at all; the message names the path or config key to fix."""


class TooManyRejects(ChartrlError):
    """More rows were rejected than ``max_reject_fraction`` allows; the message lists them."""
