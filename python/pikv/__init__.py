"""pikv from Python: the C++ client (plan, fetch, remap, store), the model
config reader, the controller's admin queries, an engine-neutral connector
core and the vLLM connector over it (pikv.vllm, imported on its own).
Failures raise pikv.Error's subclasses, one per pikv status code
(pikv.errors)."""

from pikv._pikv import (  # noqa: F401
    ChunkObject,
    ChunkPlan,
    Client,
    KvLayout,
    Options,
    PendingStore,
    Plan,
    __version__,
    model_info,
)
from pikv.admin import Admin  # noqa: F401
from pikv.errors import (  # noqa: F401
    Corruption,
    Error,
    Internal,
    InvalidArgument,
    IoError,
    NotFound,
    NotLeader,
    PermissionDenied,
    Protocol,
    Rejected,
    Retry,
    Timeout,
    TooLarge,
    Unavailable,
    Unsupported,
)
from pikv.tensors import TensorInfo, describe, kv_layout  # noqa: F401
