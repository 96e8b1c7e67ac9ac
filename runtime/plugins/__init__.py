"""The plug-in registry: planners, adapters and verifiers found by name (DESIGN.md section 5.10).

:mod:`runtime.plugins.registry` finds plug-ins by entry-point name and builds them;
:mod:`runtime.plugins.options` is the strict base of every plug-in's options model; and
:mod:`runtime.plugins.validation_errors` renders a validation error with the TOML path of each
bad field. What a run pins of its plug-ins is :mod:`runtime.taskspec.plugin_pins`. Framework-free.
"""
