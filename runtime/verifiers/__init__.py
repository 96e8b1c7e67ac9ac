"""Verifiers: does the environment now hold what the task asked for? (DESIGN.md section 5.10)

:mod:`runtime.verifiers.builtin` (``always``, ``files-equal``, ``tree-equals-source``) and
:mod:`runtime.verifiers.command` (run a test command in the environment).
"""
