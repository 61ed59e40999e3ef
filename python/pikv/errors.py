"""pikv's exceptions: every failure pikv reports to Python raises a subclass
of `pikv.Error`, chosen by pikv's status code (common/include/pikv/common/
status.h, the codes the nodes and the controller reply with), so a caller
tells a miss from a dead node from its own mistake by class:

    Error                         `code`: the status's name, which str() begins with
        NotFound                  no such chunk, node or key
        Rejected                  refused by policy: capacity, pinned, queue full
        Retry                     transiently busy; the same call may succeed later
        Timeout (TimeoutError)    a deadline passed
        Unavailable               a node, controller or Redis is down or unreachable
        IoError                   a disk or socket failed
        Corruption                stored bytes failed their checksum or size check
        InvalidArgument (ValueError)  the caller's input is malformed
        TooLarge                  over a configured size or count limit
        Unsupported               an unknown message, version or format
        PermissionDenied          this identity's role or tenant may not do it
        NotLeader                 a standby controller answered
        Protocol                  a malformed frame or header from a peer
        Internal                  a bug in pikv

`InvalidArgument` is also a `ValueError` and `Timeout` a `TimeoutError`, so
code written against Python's own exceptions keeps working; no other pikv
failure is one of Python's (catch `pikv.Error` for all of them).
"""


class Error(Exception):
    """A pikv call failed; `code` names pikv's status code."""

    code = "unknown"

    def __str__(self):
        return f"{self.code}: {super().__str__()}"


class NotFound(Error):
    code = "not_found"


class Rejected(Error):
    code = "rejected"


class Retry(Error):
    code = "retry"


class Timeout(Error, TimeoutError):
    code = "timeout"


class Unavailable(Error):
    code = "unavailable"


class IoError(Error):
    code = "io_error"


class Corruption(Error):
    code = "corruption"


class InvalidArgument(Error, ValueError):
    code = "invalid_argument"


class TooLarge(Error):
    code = "too_large"


class Unsupported(Error):
    code = "unsupported"


class Internal(Error):
    code = "internal"


class PermissionDenied(Error):
    code = "permission_denied"


class NotLeader(Error):
    code = "not_leader"


class Protocol(Error):
    code = "protocol"


_BY_CODE = {cls.code: cls for cls in Error.__subclasses__()}


def from_status(code, message):
    """The exception for a failed status of pikv's (`code` its name); a code
    this package does not know (a newer peer's) is a plain Error."""
    cls = _BY_CODE.get(code, Error)
    error = cls(message)
    if cls is Error:
        error.code = code
    return error
