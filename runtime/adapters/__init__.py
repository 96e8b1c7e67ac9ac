"""Environment adapters: the only way a run touches the outside world (DESIGN.md section 5).

A package marker only; import from the modules themselves:

* :mod:`runtime.adapters.base` -- the protocol the step engine uses (``Adapter``, ``Observation``,
  ``BlobSource``);
* :mod:`runtime.adapters.workspace.adapter` -- a directory, receipts in an adapter-owned journal;
* :mod:`runtime.adapters.git.adapter` -- a repository, receipts are commits carrying trailers;
* :mod:`runtime.adapters.factory` -- ``open_adapter``: build one by name through the plug-in
  registry (:mod:`runtime.plugins.registry`, DESIGN.md section 5.10).

Framework-free: nothing here imports Django.
"""
