"""Infrastructure failures of the data stage (a missing file, an unreachable hub, too many rejects).

They stop the job with a message naming the file or key to fix. A bad *row* is not one of these: it becomes a
``Rejected`` entry in the card (chartrl.data.contract.RowRejected)."""


class DataSourceError(RuntimeError):
    """A source cannot be read at all; the message names the path or config key to fix."""


class TooManyRejects(RuntimeError):
    """More rows were rejected than ``max_reject_fraction`` allows; the message lists them."""
