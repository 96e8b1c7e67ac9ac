"""The plug-in registry and the pins that tie a run to the plug-in code it started with (DESIGN.md section 5.10).

:mod:`runtime.plugins.registry` finds planners, adapters and verifiers by entry-point name and
validates their options; :mod:`runtime.plugins.pins` records and checks each plug-in's version
and digest for a run.
"""
