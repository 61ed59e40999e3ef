"""pikv's vLLM plugin: hands the worker's model to pikv's connector with no
vLLM file changed. vLLM loads every `vllm.general_plugins` entry point in
each of its processes (engine core, every worker) before it builds the
model; pikv's package declares this one (setup.py), so vLLM starts it.

`register` watches torch's module registrations while the process builds
modules: a module that takes a child and whose class computes logits (a
vLLM causal LM) is remembered, weakly. The connector's worker side then
asks `model_owning(layers)` for the one holding its attention layers (the
objects vLLM's forward context names), so it never takes another model
built in the same process (a drafter, a test's). Importing this module
imports no vLLM; the hook does nothing at run time, when no module is
being built."""

import weakref

_models = weakref.WeakSet()
_handle = None


def _remember(module, name, child):
    if name == "model" and callable(getattr(type(module), "compute_logits", None)):
        _models.add(module)
    return None


def register():
    """vLLM's plugin entry point; idempotent (vLLM may load plugins twice)."""
    global _handle
    if _handle is None:
        from torch.nn.modules import module

        # torch >= 2.0, as every vLLM that runs pikv's connector has.
        _handle = module.register_module_module_registration_hook(_remember)


def registered():
    """Whether vLLM started the plugin in this process."""
    return _handle is not None


def model_owning(layers):
    """The causal LM built in this process that holds every module of
    `layers` (vLLM's attention layers), or None."""
    wanted = {id(m) for m in layers}
    for model in list(_models):
        held = {id(m) for m in model.modules()}
        if wanted and wanted <= held:
            return model
    return None
